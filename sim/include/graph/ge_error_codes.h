// graph/ge_error_codes.h -- deprecated name of graph/error_codes.h, kept by CANN.
#pragma once

#include "graph/error_codes.h"
