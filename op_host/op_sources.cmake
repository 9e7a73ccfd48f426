# The operators' host sources for the CMake builds that compile them outside CANN's own project
# (the simulator's libcust_opapi.so and libophost_probe.so, native/'s libaclfa_plan.so), found by
# globbing the op families: a new source in op_host/<family>/ needs no edit here nor in its users.
# (Not a CMakeLists.txt: build.sh flattens op_host/ into msopgen's generated op_host/, which has its own.)
#   ACL_FA_OP_HOST_SOURCES      every op_host/<family>/*.cpp: OpDefs, InferShape, TilingFuncs, policies
#   ACL_FA_OP_POLICY_SOURCES    op_host/<family>/*_policy.cpp: the pure tiling policies (no CANN header)
#   ACL_FA_OP_HOST_INCLUDE_DIRS op_host/common and every op_host/<family>: sources include by bare name
file(GLOB _acl_fa_op_host_entries LIST_DIRECTORIES true ${CMAKE_CURRENT_LIST_DIR}/*)
set(ACL_FA_OP_HOST_INCLUDE_DIRS "")
foreach(_entry IN LISTS _acl_fa_op_host_entries)
  if(IS_DIRECTORY ${_entry})
    list(APPEND ACL_FA_OP_HOST_INCLUDE_DIRS ${_entry})
  endif()
endforeach()
file(GLOB ACL_FA_OP_HOST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*/*.cpp)
file(GLOB ACL_FA_OP_POLICY_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*/*_policy.cpp)
