/* acl_rt.c -- libacl_rt.so has no code of its own: it exists so that loading CANN's
 * recommended runtime library name pulls in libascendcl.so (its DT_NEEDED), where the
 * simulated runtime lives. */
typedef int acl_rt_forwards_to_ascendcl;
