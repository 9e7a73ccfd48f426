/*
 * toolchain/slog.h -- CANN's log API (toolkit include/toolchain/slog.h; the same calls as
 * dlog_pub.h), subset: module ids up to OP, levels, CheckLogLevel, DlogRecord and the
 * dlog_* macros. Simulator: records go to stderr when ASCEND_SLOG_PRINT_TO_STDOUT=1
 * (stdout there) and at or above ASCEND_GLOBAL_LOG_LEVEL (default 3 = error); the op
 * runtime also collects a TilingFunc's error records to report why tiling failed.
 */
#pragma once

#include <stdint.h>

#define DLOG_DEBUG 0x0
#define DLOG_INFO 0x1
#define DLOG_WARN 0x2
#define DLOG_ERROR 0x3

/* Module ids, in CANN's order (values matter: they select the log config). */
enum {
    SLOG, IDEDD, IDEDH, HCCL, FMK, HIAIENGINE, DVPP, RUNTIME, CCE, HDC, DRV, MDCFUSION, MDCLOCATION,
    MDCPERCEPTION, MDCFSM, MDCCOMMON, MDCMONITOR, MDCBSWP, MDCDEFAULT, MDCSC, MDCPNC, MLL, DEVMM, KERNEL,
    LIBMEDIA, CCECPU, ASCENDDK, ROS, HCCP, ROCE, TEFUSION, PROFILING, DP, APP, TS, TSDUMP, AICPU, LP, TDT,
    FE, MD, MB, ME, IMU, IMP, GE, MDCFUSA, CAMERA, ASCENDCL, TEEOS, ISP, SIS, HSM, DSS, PROCMGR, BBOX,
    AIVECTOR, TBE, FV, MDCMAP, TUNE, HSS, FFTS, OP
};

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when records of `logLevel` for `moduleId` are enabled, else 0. */
int32_t CheckLogLevel(int32_t moduleId, int32_t logLevel);
void DlogRecord(int32_t moduleId, int32_t level, const char *fmt, ...) __attribute((weak));

#ifdef __cplusplus
}
#endif

#define dlog_error(moduleId, fmt, ...)                                                      \
    do {                                                                                    \
        DlogRecord(moduleId, DLOG_ERROR, "[%s:%d]" fmt, __FILE__, __LINE__, ##__VA_ARGS__); \
    } while (0)

/* A record at `level` when that level is enabled for the module (the simulator's one body of
 * the leveled macros below). */
#define ACL_FA_SIM_DLOG_IF_ENABLED(moduleId, level, fmt, ...)                                \
    do {                                                                                     \
        if (CheckLogLevel(moduleId, level) == 1) {                                           \
            DlogRecord(moduleId, level, "[%s:%d]" fmt, __FILE__, __LINE__, ##__VA_ARGS__);   \
        }                                                                                    \
    } while (0)

#define dlog_warn(moduleId, fmt, ...) ACL_FA_SIM_DLOG_IF_ENABLED(moduleId, DLOG_WARN, fmt, ##__VA_ARGS__)
#define dlog_info(moduleId, fmt, ...) ACL_FA_SIM_DLOG_IF_ENABLED(moduleId, DLOG_INFO, fmt, ##__VA_ARGS__)
