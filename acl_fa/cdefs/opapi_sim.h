/* The simulator's libopapi.so extension (sim/include/acl_fa_sim_opapi.h; backend "sim" only): GM
 * traffic of the builtin ops it ran, per device. */
typedef struct aclfaSimBuiltinOpStats {
    uint64_t calls;
    uint64_t elements;
    uint64_t gmReadBytes;
    uint64_t gmWriteBytes;
} aclfaSimBuiltinOpStats;

aclError aclfaSimGetBuiltinOpStats(int32_t deviceId, aclfaSimBuiltinOpStats *stats);
