/*
 * acl/acl.h -- simulator copy of the ACL 1.17 umbrella header. The real one also includes
 * acl_op.h and acl_mdl.h (single-op and model APIs acl-fa does not use).
 */
#pragma once

#include "acl/acl_rt.h"
