// exe_graph/runtime/base_type.h -- (metadef inc/external/exe_graph/runtime/base_type.h)
#pragma once

typedef unsigned int UINT32;
