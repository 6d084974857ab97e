// Package turns tells whose turn each PM sample was, for any number of contexts
// time-slicing a GPU.
//
// Time-slicing gives each context with work a turn of about 2 ms (H100: 2.09 ms) in a fixed
// rotation that skips contexts with nothing to run, and every switch costs the front end about
// 220,000 cycles that PM sampling counts (attribution/ownership.go). So the samples between
// two switches (a segment) are one context's; measured on an H100 (run BB), no segment held
// the record edges of two processes. Which context's, the records and the samples say in
// part:
//
//   - a traced process owns a segment only while one of its records spans it (its records
//     span the turns of the others too, so coverage alone does not say whose it is);
//   - a record that starts or ends inside a segment makes it that process's turn (a kernel
//     starts and ends only while its context runs), and no other's;
//   - an untraced process (NVML lists it) can own any segment in which the GPU works;
//   - what a sample counted, where the caller can say ([Signatures]): a segment with a sample
//     that kept a pipe busy which a context is known never to use is unlikely its turn;
//   - how likely what a sample counted is were it a context's turn ([Evidence]): a whole turn
//     of a traced process reads DRAM at the rates its kernels are known to read, an untraced
//     process's at any rate;
//   - the rotation: after a context's turn comes the next context in a fixed cyclic order
//     that has work (a traced process has work while one of its records spans the switch;
//     an untraced one, with a probability).
//
// A hidden Markov model over the segments puts that together: its states are the contexts,
// its emissions the evidence above, its transitions the rotation, for each cyclic order of
// the contexts (up to maxStates of them); the order that explains the segments best, over a
// decayed history, is used. Forward-backward gives each segment a distribution over its
// owner; a sample that holds switches averages the owners of the turns that pass in it.
// Under MPS the clients run in the server's one context: they are one state (the group),
// split among themselves by the rate fit.
//
// The attribution join is its one user: per chunk of samples it lists the contexts
// ([Context]), records what the chunk's records cover of each sample ([Cover]) and asks a
// device's [State] for the owners ([State.Chunk]); the package knows nothing of records,
// pods or NVML beyond that.
package turns
