/* A library that links libcuda.so.1 (the fake driver) and calls it: what the check that
 * libqkv_runtime loads no libcuda must be able to see (tests/CMakeLists.txt). */
int cuInit(unsigned flags);

int cuda_link_control(void) { return cuInit(0); }
