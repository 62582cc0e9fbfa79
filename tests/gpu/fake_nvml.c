/*
 * A fake libnvidia-ml.so.1 for mignurse's NVML probe tests.
 *
 * It exports only the read functions pynvml (nvidia-ml-py 13.615.71) resolves for the calls
 * mignurse.gpu.nvml.probe() makes, with the argument layouts pynvml passes. There is no
 * Set/Create/Destroy/Reset symbol at all, so a probe that tried a mutating call would get
 * NVMLError_FunctionNotFound from pynvml instead of silently "succeeding".
 *
 * FAKE_NVML_SCENARIO picks the machine (read at init):
 *   h100-mig           8x H100 80GB, MIG enabled, 7x 1g.10gb each
 *   l40s               1x L40S, no MIG (NotSupported)
 *   mixed              H100 all-balanced (GI lookup denied: non-root), H100 disabled with
 *                      enable pending, L40S
 *   empty-slots        1x H100 with MIG devices in slots 0, 3 and 6 only
 *   old-driver         1x H100 whose driver lacks nvmlDeviceGetGpuInstanceProfileInfoV
 *   restricted         2x H100, no GI lookup and no device attributes: memory only
 *   gpu-lost           2x H100, the second one fallen off the bus
 *   driver-not-loaded  nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   no-gpus            the driver is up but lists no GPUs
 * FAKE_NVML_CALL_LOG, when set, names a file every exported call appends its name to.
 *
 * Build: gcc -shared -fPIC -O2 -o libnvidia-ml.so.1 fake_nvml.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

/* NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2): sizeof | 2 << 24, as pynvml defines it. */
#define PROFILE_INFO_V2 0x02000098u

/* Layouts as pynvml's ctypes structures declare them. */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
    unsigned int version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
        copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
    char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;

typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount,
        computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct fake_dev *nvmlDevice_t;
typedef struct fake_dev *nvmlGpuInstance_t; /* a GI handle is its MIG device here */

typedef struct {
    nvmlDevice_t device;
    unsigned int id, profileId, start, size;
} nvmlGpuInstanceInfo_t;

/* One GPU instance profile (values from `nvidia-smi mig -lgip` on an H100 80GB HBM3). */
typedef struct {
    unsigned int profile_enum, id, slices, instances, sms, ce, dec, enc, jpg, ofa;
    unsigned long long mem_mb;
    const char *name;
} profile_t;

static const profile_t H100_PROFILES[] = {
    {0x0, 19, 1, 7, 16, 1, 1, 0, 1, 0, 9984, "MIG 1g.10gb"},
    {0x7, 20, 1, 1, 16, 1, 1, 1, 1, 1, 9984, "MIG 1g.10gb+me"},
    {0x9, 15, 1, 4, 26, 1, 1, 0, 1, 0, 19968, "MIG 1g.20gb"},
    {0x1, 14, 2, 3, 32, 2, 2, 0, 2, 0, 19968, "MIG 2g.20gb"},
    {0x2, 9, 3, 2, 60, 3, 3, 0, 3, 0, 40448, "MIG 3g.40gb"},
    {0x3, 5, 4, 1, 64, 4, 4, 0, 4, 0, 40448, "MIG 4g.40gb"},
    {0x4, 0, 7, 1, 132, 8, 7, 0, 7, 1, 80896, "MIG 7g.80gb"},
};
#define N_H100_PROFILES (sizeof(H100_PROFILES) / sizeof(H100_PROFILES[0]))

enum { P_1G10 = 0, P_1G10ME = 1, P_1G20 = 2, P_2G20 = 3, P_3G40 = 4, P_4G40 = 5, P_7G80 = 6 };

#define MAX_GPUS 8
#define MAX_MIG 7

struct fake_dev {
    int is_mig;
    int gpu;  /* index of the GPU (the parent, for a MIG device) */
    int slot; /* MIG slot, -1 for a GPU */
    /* GPU fields */
    const char *name;
    int mig_capable, mig_current, mig_pending, lost;
    unsigned long long mem_mb;
    /* MIG device fields */
    int present, profile, gi, ci;
    unsigned int empty_error; /* what an empty slot answers: NotFound or InvalidArgument */
};

static struct fake_dev gpus[MAX_GPUS];
static struct fake_dev migs[MAX_GPUS][MAX_MIG];
static int n_gpus;
static int initialized;
static int init_error;          /* nvmlInit's answer */
static int has_profile_v2 = 1;  /* old drivers lack nvmlDeviceGetGpuInstanceProfileInfoV */
static int gi_lookup_error;     /* nvmlDeviceGetGpuInstanceById without root */
static int attributes_error;    /* nvmlDeviceGetAttributes_v2 not available */
static const char *driver_version = "570.133.20";

static void log_call(const char *name) {
    const char *path = getenv("FAKE_NVML_CALL_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s\n", name);
    fclose(f);
}

#define CALL(name) log_call(name)
#define NEED_INIT() \
    do { if (!initialized) return NVML_ERROR_UNINITIALIZED; } while (0)

static void add_gpu(const char *name, int mig_capable, int current, int pending,
                    unsigned long long mem_mb) {
    struct fake_dev *g = &gpus[n_gpus];
    memset(g, 0, sizeof(*g));
    g->gpu = n_gpus;
    g->slot = -1;
    g->name = name;
    g->mig_capable = mig_capable;
    g->mig_current = current;
    g->mig_pending = pending;
    g->mem_mb = mem_mb;
    for (int s = 0; s < MAX_MIG; s++) {
        struct fake_dev *m = &migs[n_gpus][s];
        memset(m, 0, sizeof(*m));
        m->is_mig = 1;
        m->gpu = n_gpus;
        m->slot = s;
        m->empty_error = NVML_ERROR_NOT_FOUND;
    }
    n_gpus++;
}

static void add_mig(int gpu, int slot, int profile, int gi, int ci) {
    struct fake_dev *m = &migs[gpu][slot];
    m->present = 1;
    m->profile = profile;
    m->gi = gi;
    m->ci = ci;
}

static void setup(void) {
    const char *s = getenv("FAKE_NVML_SCENARIO");
    if (!s) s = "h100-mig";
    n_gpus = 0;
    init_error = NVML_SUCCESS;
    has_profile_v2 = 1;
    gi_lookup_error = 0;
    attributes_error = 0;
    driver_version = "570.133.20";
    if (!strcmp(s, "h100-mig")) {
        for (int g = 0; g < 8; g++) {
            add_gpu("NVIDIA H100 80GB HBM3", 1, 1, 1, 81559);
            /* all-1g.10gb: GPU instances 7..13, one full compute instance each */
            for (int slot = 0; slot < 7; slot++) add_mig(g, slot, P_1G10, 7 + slot, 0);
        }
    } else if (!strcmp(s, "l40s")) {
        add_gpu("NVIDIA L40S", 0, 0, 0, 46068);
    } else if (!strcmp(s, "mixed")) {
        add_gpu("NVIDIA H100 80GB HBM3", 1, 1, 1, 81559);
        /* all-balanced: 2x 1g.10gb + 2g.20gb + 3g.40gb */
        add_mig(0, 0, P_3G40, 2, 0);
        add_mig(0, 1, P_2G20, 3, 0);
        add_mig(0, 2, P_1G10, 9, 0);
        add_mig(0, 3, P_1G10, 10, 0);
        add_gpu("NVIDIA H100 80GB HBM3", 1, 0, 1, 81559);
        add_gpu("NVIDIA L40S", 0, 0, 0, 46068);
        gi_lookup_error = NVML_ERROR_NO_PERMISSION;
    } else if (!strcmp(s, "empty-slots")) {
        add_gpu("NVIDIA H100 80GB HBM3", 1, 1, 1, 81559);
        add_mig(0, 0, P_1G10, 7, 0);
        add_mig(0, 3, P_1G10, 10, 0);
        add_mig(0, 6, P_1G10, 13, 0);
        /* go-nvlib skips both answers for an empty slot; give the walk one of each */
        migs[0][1].empty_error = NVML_ERROR_INVALID_ARGUMENT;
        migs[0][4].empty_error = NVML_ERROR_INVALID_ARGUMENT;
    } else if (!strcmp(s, "old-driver")) {
        driver_version = "470.57.02";
        has_profile_v2 = 0;
        add_gpu("NVIDIA H100 80GB HBM3", 1, 1, 1, 81559);
        add_mig(0, 0, P_1G10ME, 7, 0);
        add_mig(0, 1, P_1G20, 3, 0);
        add_mig(0, 2, P_2G20, 4, 0);
        add_mig(0, 3, P_3G40, 2, 0);
    } else if (!strcmp(s, "restricted")) {
        gi_lookup_error = NVML_ERROR_NO_PERMISSION;
        attributes_error = NVML_ERROR_NOT_SUPPORTED;
        add_gpu("NVIDIA H100 80GB HBM3", 1, 1, 1, 81559);
        add_mig(0, 0, P_7G80, 0, 0);
        add_gpu("NVIDIA H100 80GB HBM3", 1, 1, 1, 81559);
        add_mig(1, 0, P_3G40, 1, 0);
        add_mig(1, 1, P_3G40, 2, 0);
    } else if (!strcmp(s, "gpu-lost")) {
        add_gpu("NVIDIA H100 80GB HBM3", 1, 0, 0, 81559);
        add_gpu("NVIDIA H100 80GB HBM3", 1, 0, 0, 81559);
        gpus[1].lost = 1;
    } else if (!strcmp(s, "driver-not-loaded")) {
        init_error = NVML_ERROR_DRIVER_NOT_LOADED;
    } else if (!strcmp(s, "no-gpus")) {
        /* nothing */
    } else {
        init_error = NVML_ERROR_UNKNOWN;
    }
}

static nvmlReturn_t do_init(void) {
    setup();
    if (init_error != NVML_SUCCESS) return init_error;
    initialized = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { CALL("nvmlInit"); return do_init(); }
nvmlReturn_t nvmlInit_v2(void) { CALL("nvmlInit_v2"); return do_init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    CALL("nvmlInitWithFlags");
    return do_init();
}

nvmlReturn_t nvmlShutdown(void) {
    CALL("nvmlShutdown");
    NEED_INIT();
    initialized = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    CALL("nvmlErrorString");
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t copy_text(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    CALL("nvmlSystemGetDriverVersion");
    NEED_INIT();
    return copy_text(version, length, driver_version);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    CALL("nvmlDeviceGetCount_v2");
    NEED_INIT();
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)n_gpus;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    CALL("nvmlDeviceGetHandleByIndex_v2");
    NEED_INIT();
    if (!device || index >= (unsigned int)n_gpus) return NVML_ERROR_INVALID_ARGUMENT;
    if (gpus[index].lost) return NVML_ERROR_GPU_IS_LOST;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

/* A handle this library gave out, or NULL. */
static struct fake_dev *valid(nvmlDevice_t d) {
    if (!d) return NULL;
    for (int g = 0; g < n_gpus; g++) {
        if (d == &gpus[g]) return d;
        for (int s = 0; s < MAX_MIG; s++)
            if (d == &migs[g][s] && migs[g][s].present) return d;
    }
    return NULL;
}

#define DEV_OR_FAIL(d)                                  \
    do {                                                \
        NEED_INIT();                                    \
        if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT; \
    } while (0)

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    CALL("nvmlDeviceGetName");
    DEV_OR_FAIL(device);
    if (device->is_mig) {
        char buf[96];
        snprintf(buf, sizeof buf, "%s MIG %s", gpus[device->gpu].name,
                 H100_PROFILES[device->profile].name + 4);
        return copy_text(name, length, buf);
    }
    return copy_text(name, length, device->name);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    char buf[96];
    CALL("nvmlDeviceGetUUID");
    DEV_OR_FAIL(device);
    if (device->is_mig)
        snprintf(buf, sizeof buf, "MIG-%08x-0000-5000-8000-%012x", 0xa0000000u + device->gpu,
                 (unsigned int)(device->gi * 16 + device->ci));
    else
        snprintf(buf, sizeof buf, "GPU-%08x-1111-4222-8333-%012x", 0xc0ffee00u + device->gpu,
                 (unsigned int)device->gpu);
    return copy_text(uuid, length, buf);
}

/* p5.48xlarge bus numbers */
static const unsigned int BUSES[MAX_GPUS] = {0x53, 0x64, 0x75, 0x86, 0x97, 0xa8, 0xb9, 0xca};

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    CALL("nvmlDeviceGetPciInfo_v3");
    DEV_OR_FAIL(device);
    if (!pci || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    pci->bus = BUSES[device->gpu];
    pci->pciDeviceId = strstr(device->name, "L40S") ? 0x26b910de : 0x233010de;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current,
                                  unsigned int *pending) {
    CALL("nvmlDeviceGetMigMode");
    DEV_OR_FAIL(device);
    if (!current || !pending || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    *current = (unsigned int)device->mig_current;
    *pending = (unsigned int)device->mig_pending;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    CALL("nvmlDeviceGetMaxMigDeviceCount");
    DEV_OR_FAIL(device);
    if (!count || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    *count = device->mig_current ? MAX_MIG : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *mig) {
    CALL("nvmlDeviceGetMigDeviceHandleByIndex");
    DEV_OR_FAIL(device);
    if (!mig || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    if (!device->mig_current || index >= MAX_MIG) return NVML_ERROR_INVALID_ARGUMENT;
    struct fake_dev *m = &migs[device->gpu][index];
    if (!m->present) return (nvmlReturn_t)m->empty_error;
    *mig = m;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
    CALL("nvmlDeviceIsMigDeviceHandle");
    DEV_OR_FAIL(device);
    if (!is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = (unsigned int)device->is_mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                          nvmlDevice_t *device) {
    CALL("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    DEV_OR_FAIL(mig);
    if (!device || !mig->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &gpus[mig->gpu];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    CALL("nvmlDeviceGetGpuInstanceId");
    DEV_OR_FAIL(device);
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *id = (unsigned int)device->gi;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    CALL("nvmlDeviceGetComputeInstanceId");
    DEV_OR_FAIL(device);
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *id = (unsigned int)device->ci;
    return NVML_SUCCESS;
}

static unsigned long long total_mb(const struct fake_dev *d) {
    return d->is_mig ? H100_PROFILES[d->profile].mem_mb : d->mem_mb;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    CALL("nvmlDeviceGetMemoryInfo");
    DEV_OR_FAIL(device);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = total_mb(device) << 20;
    memory->used = 13ull << 20;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    CALL("nvmlDeviceGetMemoryInfo_v2");
    DEV_OR_FAIL(device);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = total_mb(device) << 20;
    memory->reserved = 0;
    memory->used = 13ull << 20;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

static const profile_t *profile_by_enum(unsigned int profile_enum) {
    for (unsigned int i = 0; i < N_H100_PROFILES; i++)
        if (H100_PROFILES[i].profile_enum == profile_enum) return &H100_PROFILES[i];
    return NULL;
}

/* Shared checks of both profile-info calls; NULL with *ret set when there is no answer. */
static const profile_t *profile_query(nvmlDevice_t device, unsigned int profile_enum,
                                      const void *info, nvmlReturn_t *ret) {
    *ret = NVML_ERROR_UNINITIALIZED;
    if (!initialized) return NULL;
    *ret = NVML_ERROR_INVALID_ARGUMENT;
    if (!valid(device) || device->is_mig || !info) return NULL;
    *ret = NVML_ERROR_NOT_SUPPORTED;
    if (!device->mig_capable) return NULL;
    /* Like a real driver: enums past the 8-slice one are unknown to it, the rest unsupported. */
    *ret = profile_enum > 0x9 ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
    const profile_t *p = profile_by_enum(profile_enum);
    if (p) *ret = NVML_SUCCESS;
    return p;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info) {
    nvmlReturn_t ret;
    CALL("nvmlDeviceGetGpuInstanceProfileInfo");
    const profile_t *p = profile_query(device, profile, info, &ret);
    if (!p) return ret;
    memset(info, 0, sizeof(*info));
    info->id = p->id;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sms;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->mem_mb;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info) {
    nvmlReturn_t ret;
    CALL("nvmlDeviceGetGpuInstanceProfileInfoV");
    if (!has_profile_v2) return NVML_ERROR_FUNCTION_NOT_FOUND;
    /* The real driver insists on the struct version; pynvml's own wrapper leaves it 0. */
    if (info && info->version != PROFILE_INFO_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const profile_t *p = profile_query(device, profile, info, &ret);
    if (!p) return ret;
    memset(info, 0, sizeof(*info));
    info->version = PROFILE_INFO_V2;
    info->id = p->id;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sms;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->mem_mb;
    snprintf(info->name, sizeof info->name, "%s", p->name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *instance) {
    CALL("nvmlDeviceGetGpuInstanceById");
    DEV_OR_FAIL(device);
    if (!instance || device->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    if (gi_lookup_error) return gi_lookup_error;
    for (int s = 0; s < MAX_MIG; s++) {
        struct fake_dev *m = &migs[device->gpu][s];
        if (m->present && (unsigned int)m->gi == id) {
            *instance = m;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance, nvmlGpuInstanceInfo_t *info) {
    CALL("nvmlGpuInstanceGetInfo");
    NEED_INIT();
    if (!info || !valid(instance) || !instance->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    const profile_t *p = &H100_PROFILES[instance->profile];
    info->device = &gpus[instance->gpu];
    info->id = (unsigned int)instance->gi;
    info->profileId = p->id;
    info->start = (unsigned int)instance->slot;
    info->size = p->slices;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attrs) {
    CALL("nvmlDeviceGetAttributes_v2");
    DEV_OR_FAIL(device);
    if (!attrs) return NVML_ERROR_INVALID_ARGUMENT;
    if (attributes_error) return attributes_error;
    if (!device->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    const profile_t *p = &H100_PROFILES[device->profile];
    attrs->multiprocessorCount = p->sms;
    attrs->sharedCopyEngineCount = p->ce;
    attrs->sharedDecoderCount = p->dec;
    attrs->sharedEncoderCount = p->enc;
    attrs->sharedJpegCount = p->jpg;
    attrs->sharedOfaCount = p->ofa;
    attrs->gpuInstanceSliceCount = p->slices;
    attrs->computeInstanceSliceCount = p->slices;
    attrs->memorySizeMB = p->mem_mb;
    return NVML_SUCCESS;
}
