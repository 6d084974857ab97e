/* fake_nvperf.c: built twice, as libnvperf_host.so and libnvperf_target.so, so the binding's
 * preload step has something to load. Empty on purpose. */
int cupti_fake_nvperf_placeholder;
