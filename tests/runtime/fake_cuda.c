/* A fake CUDA driver, built as libcuda.so.1 for the tests of qkv/runtime/cuda.hpp, which load
 * it through QKV_LIBCUDA. It implements the driver API entry points qkv resolves, with the
 * real driver's signatures, error codes, names and texts, over host memory:
 *
 *   QKV_FAKE_CUDA_DEVICES unset  cuInit fails with CUDA_ERROR_NO_DEVICE (a machine whose
 *                                driver is installed but sees no GPU)
 *   QKV_FAKE_CUDA_DEVICES=N      cuInit succeeds and N devices (0 to 4) exist: "Fake GPU i",
 *                                sm_90 for device 0, sm_80 for the others
 *
 * It checks what a real driver checks and qkv must get right: a context is current on the
 * calling thread (per thread, as in CUDA) for every call that needs one, copies stay inside
 * an allocation, frees and releases match, a launch's stream is on the current context.
 * Device memory is 1 MiB per process, so a large cuMemAlloc fails as it would on a GPU.
 * Modules are text starting with "// fake PTX" that list their kernels as ".entry NAME"
 * lines; the one kernel it can run is add_one(float *p, int n): p[i] += 1 for i < n, run
 * on the host when launched. A kernel that would write outside its buffer does nothing and
 * makes the next synchronize fail with CUDA_ERROR_ILLEGAL_ADDRESS, as an asynchronous
 * kernel fault does (once: a real driver keeps the error and the context is lost).
 *
 * fake_cuda_count(what) tells the tests what is live: "init" (cuInit calls), "contexts"
 * (primary context retains not released), "allocations", "modules", "streams", "launches",
 * and "misuse" (frees of unknown pointers, releases of unretained contexts, unloads of
 * unknown modules: a correct caller makes none).
 *
 * With QKV_FAKE_CUDA_ANY_PTX=1 it also loads real PTX (any image with an ".entry NAME(" line),
 * whose kernels it launches as no-ops (counted as launches, with their grid checked): what
 * the tests of compiled CUDA kernels' host code use, on machines without a GPU.
 *
 * Built with FAKE_CUDA_WITHOUT_LAUNCH it lacks cuLaunchKernel: a driver missing a symbol. */
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  SUCCESS = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NOT_INITIALIZED = 3,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
  ILLEGAL_ADDRESS = 700
};

enum { MAX_DEVICES = 4, MAX_ALLOCATIONS = 64, MEMORY = 1 << 20 };

struct CUctx_st {
  int device;
  int retains;
};
struct allocation {
  char *p;
  size_t bytes;
};
struct CUmod_st {
  struct CUctx_st *ctx;
  char *image;
};
struct CUstream_st {
  struct CUctx_st *ctx;
};

static int initialised, devices;
static struct CUctx_st contexts[MAX_DEVICES];
static struct allocation allocations[MAX_ALLOCATIONS];
static size_t memory_used;
static int live_modules, live_streams, launches, init_calls, misuse;
static CUresult pending; /* a kernel fault, reported by the next synchronize */
static __thread struct CUctx_st *current;

int fake_cuda_count(const char *what) {
  int n = 0, i;
  if (!strcmp(what, "init"))
    return init_calls;
  if (!strcmp(what, "contexts")) {
    for (i = 0; i < MAX_DEVICES; ++i)
      n += contexts[i].retains;
    return n;
  }
  if (!strcmp(what, "allocations")) {
    for (i = 0; i < MAX_ALLOCATIONS; ++i)
      n += allocations[i].p != NULL;
    return n;
  }
  if (!strcmp(what, "modules"))
    return live_modules;
  if (!strcmp(what, "streams"))
    return live_streams;
  if (!strcmp(what, "launches"))
    return launches;
  if (!strcmp(what, "misuse"))
    return misuse;
  return -1;
}

/* ---- errors ----------------------------------------------------------------------------- */

static const struct {
  CUresult code;
  const char *name, *text;
} errors[] = {
    {SUCCESS, "CUDA_SUCCESS", "no error"},
    {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
};

static CUresult lookup(CUresult error, const char **out, int text) {
  size_t i;
  for (i = 0; i < sizeof errors / sizeof errors[0]; ++i)
    if (errors[i].code == error) {
      *out = text ? errors[i].text : errors[i].name;
      return SUCCESS;
    }
  *out = NULL;
  return INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **name) { return lookup(error, name, 0); }
CUresult cuGetErrorString(CUresult error, const char **text) { return lookup(error, text, 1); }

/* ---- initialisation and devices --------------------------------------------------------- */

CUresult cuInit(unsigned flags) {
  const char *env = getenv("QKV_FAKE_CUDA_DEVICES");
  ++init_calls;
  if (flags != 0)
    return INVALID_VALUE;
  if (!env)
    return NO_DEVICE;
  devices = atoi(env);
  if (devices < 0 || devices > MAX_DEVICES)
    return INVALID_VALUE;
  initialised = 1;
  return SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  if (!initialised)
    return NOT_INITIALIZED;
  *count = devices;
  return SUCCESS;
}

CUresult cuDeviceGet(int *device, int ordinal) {
  if (!initialised)
    return NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= devices)
    return INVALID_DEVICE;
  *device = ordinal;
  return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, int device) {
  const char *base = "Fake GPU ";
  if (device < 0 || device >= devices)
    return INVALID_DEVICE;
  if (len < (int)strlen(base) + 2)
    return INVALID_VALUE;
  strcpy(name, base);
  name[strlen(base)] = (char)('0' + device);
  name[strlen(base) + 1] = '\0';
  return SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  if (device < 0 || device >= devices)
    return INVALID_DEVICE;
  if (attribute == 75) /* compute capability major */
    *value = device == 0 ? 9 : 8;
  else if (attribute == 76) /* minor */
    *value = 0;
  else
    return INVALID_VALUE;
  return SUCCESS;
}

/* ---- contexts --------------------------------------------------------------------------- */

CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, int device) {
  if (device < 0 || device >= devices)
    return INVALID_DEVICE;
  contexts[device].device = device;
  ++contexts[device].retains;
  *ctx = &contexts[device];
  return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  if (device < 0 || device >= devices)
    return INVALID_DEVICE;
  if (contexts[device].retains == 0) {
    ++misuse;
    return INVALID_CONTEXT;
  }
  --contexts[device].retains;
  return SUCCESS;
}

CUresult cuCtxSetCurrent(struct CUctx_st *ctx) {
  current = ctx;
  return SUCCESS;
}

/* Whether the calling thread has a live context current, as every call below needs. */
static int bound(void) { return current && current->retains > 0; }

static CUresult synchronize(void) {
  CUresult r = pending;
  if (!bound())
    return INVALID_CONTEXT;
  pending = SUCCESS;
  return r;
}

CUresult cuCtxSynchronize(void) { return synchronize(); }

/* ---- memory ----------------------------------------------------------------------------- */

/* The allocation holding [p, p + bytes), or NULL. */
static struct allocation *find(CUdeviceptr p, size_t bytes) {
  int i;
  for (i = 0; i < MAX_ALLOCATIONS; ++i) {
    struct allocation *a = &allocations[i];
    CUdeviceptr base = (CUdeviceptr)(size_t)a->p;
    if (a->p && p >= base && p - base <= a->bytes && bytes <= a->bytes - (p - base))
      return a;
  }
  return NULL;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  int i;
  if (!bound())
    return INVALID_CONTEXT;
  if (bytes == 0)
    return INVALID_VALUE;
  if (bytes > MEMORY - memory_used)
    return OUT_OF_MEMORY;
  for (i = 0; i < MAX_ALLOCATIONS; ++i)
    if (!allocations[i].p) {
      allocations[i].p = malloc(bytes);
      if (!allocations[i].p)
        return OUT_OF_MEMORY;
      allocations[i].bytes = bytes;
      memory_used += bytes;
      *p = (CUdeviceptr)(size_t)allocations[i].p;
      return SUCCESS;
    }
  return OUT_OF_MEMORY;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  struct allocation *a = find(p, 0);
  if (!bound())
    return INVALID_CONTEXT;
  if (!a || (CUdeviceptr)(size_t)a->p != p) {
    ++misuse;
    return INVALID_VALUE;
  }
  free(a->p);
  memory_used -= a->bytes;
  a->p = NULL;
  return SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
  if (!bound())
    return INVALID_CONTEXT;
  if (!find(dst, bytes) || !src)
    return INVALID_VALUE;
  memcpy((void *)(size_t)dst, src, bytes);
  return SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  if (!bound())
    return INVALID_CONTEXT;
  if (!find(src, bytes) || !dst)
    return INVALID_VALUE;
  memcpy(dst, (const void *)(size_t)src, bytes);
  return SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes) {
  if (!bound())
    return INVALID_CONTEXT;
  if (!find(dst, bytes))
    return INVALID_VALUE;
  memset((void *)(size_t)dst, value, bytes);
  return SUCCESS;
}

/* ---- modules and kernels ---------------------------------------------------------------- */

static const char magic[] = "// fake PTX";

static int any_ptx(void) {
  const char *env = getenv("QKV_FAKE_CUDA_ANY_PTX");
  return env && strcmp(env, "1") == 0;
}

CUresult cuModuleLoadData(struct CUmod_st **out, const void *image) {
  struct CUmod_st *m;
  if (!bound())
    return INVALID_CONTEXT;
  if (!image)
    return INVALID_IMAGE;
  if (strncmp(image, magic, sizeof magic - 1) != 0 &&
      !(any_ptx() && strstr(image, ".entry ") != NULL))
    return INVALID_IMAGE;
  m = malloc(sizeof *m);
  if (!m)
    return OUT_OF_MEMORY;
  m->ctx = current;
  m->image = strdup(image);
  ++live_modules;
  *out = m;
  return SUCCESS;
}

CUresult cuModuleUnload(struct CUmod_st *m) {
  if (!bound())
    return INVALID_CONTEXT;
  if (!m || live_modules == 0) {
    ++misuse;
    return INVALID_HANDLE;
  }
  free(m->image);
  free(m);
  --live_modules;
  return SUCCESS;
}

/* A kernel of real PTX: launched, it does nothing. */
static CUresult noop(void **args) {
  (void)args;
  return SUCCESS;
}

/* The one kernel the fake runs. */
static CUresult add_one(void **args) {
  CUdeviceptr p = *(CUdeviceptr *)args[0];
  int n = *(int *)args[1], i;
  float *f = (float *)(size_t)p;
  if (n < 0 || !find(p, (size_t)n * sizeof(float)))
    return ILLEGAL_ADDRESS;
  for (i = 0; i < n; ++i)
    f[i] += 1.0f;
  return SUCCESS;
}

/* A function handle: the host code that stands for the kernel. */
struct CUfunc_st {
  CUresult (*run)(void **args);
};
static struct CUfunc_st add_one_kernel = {add_one};
static struct CUfunc_st noop_kernel = {noop};

CUresult cuModuleGetFunction(struct CUfunc_st **fn, struct CUmod_st *m, const char *name) {
  const char *entry;
  size_t len = strlen(name);
  if (!bound())
    return INVALID_CONTEXT;
  if (!m || !m->image)
    return INVALID_HANDLE;
  /* Real PTX (QKV_FAKE_CUDA_ANY_PTX=1): ".entry NAME(" declares a kernel. */
  if (any_ptx() && strncmp(m->image, magic, sizeof magic - 1) != 0) {
    for (entry = strstr(m->image, ".entry "); entry; entry = strstr(entry + 1, ".entry ")) {
      const char *at = entry + 7;
      if (!strncmp(at, name, len) && at[len] == '(') {
        *fn = &noop_kernel;
        return SUCCESS;
      }
    }
    return NOT_FOUND;
  }
  /* ".entry NAME" ending the line: the module lists the kernel. */
  for (entry = strstr(m->image, ".entry "); entry; entry = strstr(entry + 1, ".entry ")) {
    const char *at = entry + 7;
    if (!strncmp(at, name, len) && (at[len] == '\n' || at[len] == '\0')) {
      if (strcmp(name, "add_one") != 0)
        return NOT_FOUND; /* listed, but no kernel the fake can run */
      *fn = &add_one_kernel;
      return SUCCESS;
    }
  }
  return NOT_FOUND;
}

CUresult cuStreamCreate(struct CUstream_st **s, unsigned flags) {
  if (!bound())
    return INVALID_CONTEXT;
  if (flags > 1)
    return INVALID_VALUE;
  *s = malloc(sizeof **s);
  if (!*s)
    return OUT_OF_MEMORY;
  (*s)->ctx = current;
  ++live_streams;
  return SUCCESS;
}

CUresult cuStreamDestroy_v2(struct CUstream_st *s) {
  if (!s) {
    ++misuse;
    return INVALID_HANDLE;
  }
  free(s);
  --live_streams;
  return SUCCESS;
}

CUresult cuStreamSynchronize(struct CUstream_st *s) {
  if (s && s->ctx != current)
    return INVALID_HANDLE;
  return synchronize();
}

#ifndef FAKE_CUDA_WITHOUT_LAUNCH
CUresult cuLaunchKernel(struct CUfunc_st *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared_bytes, struct CUstream_st *s,
                        void **params, void **extra) {
  if (!bound())
    return INVALID_CONTEXT;
  if ((fn != &add_one_kernel && fn != &noop_kernel) || (s && s->ctx != current))
    return INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long)bx * by * bz > 1024 ||
      shared_bytes > 48 * 1024 || !params || extra)
    return INVALID_VALUE;
  ++launches;
  if (fn->run(params) != SUCCESS)
    pending = ILLEGAL_ADDRESS;
  return SUCCESS;
}
#endif
