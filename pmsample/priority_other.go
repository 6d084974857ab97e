//go:build !linux

package pmsample

import "errors"

const decodeNice = 0

func raisePriority() error { return errors.New("thread priority not supported on this OS") }
