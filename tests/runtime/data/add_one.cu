// The kernel of tests/runtime/data/add_one.ptx (how it was made: the comment at its top).
extern "C" __global__ void add_one(float *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] += 1.0f;
}
