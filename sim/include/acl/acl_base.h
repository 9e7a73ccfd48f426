/*
 * acl/acl_base.h -- simulator copy of the ACL 1.17 umbrella base header. The real one also
 * includes acl_base_mdl.h and error_codes/ge_error_codes.h (model and graph-engine parts acl-fa
 * does not use).
 */
#pragma once

#include "acl/acl_base_rt.h"
#include "acl/error_codes/rt_error_codes.h"
