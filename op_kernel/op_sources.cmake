# The operators' kernel sources for the simulator's CMake build, found by globbing the op families:
# a new source in op_kernel/<family>/ needs no edit here nor in its users. (Not a CMakeLists.txt:
# build.sh flattens op_kernel/ into msopgen's generated op_kernel/, which has its own.)
#   ACL_FA_OP_KERNEL_INCLUDE_DIRS         op_kernel/common and every op_kernel/<family> (bare-name includes)
#   ACL_FA_OP_KERNEL_SOURCES_<FAMILY>     op_kernel/<family>/*.cpp, <FAMILY> the folder's name in
#                                         upper case (e.g. ACL_FA_OP_KERNEL_SOURCES_FLASH_ATTENTION_GRAD)
file(GLOB _acl_fa_op_kernel_entries LIST_DIRECTORIES true ${CMAKE_CURRENT_LIST_DIR}/*)
set(ACL_FA_OP_KERNEL_INCLUDE_DIRS "")
foreach(_entry IN LISTS _acl_fa_op_kernel_entries)
  if(IS_DIRECTORY ${_entry})
    list(APPEND ACL_FA_OP_KERNEL_INCLUDE_DIRS ${_entry})
    get_filename_component(_family ${_entry} NAME)
    string(TOUPPER ${_family} _family)
    file(GLOB ACL_FA_OP_KERNEL_SOURCES_${_family} CONFIGURE_DEPENDS ${_entry}/*.cpp)
  endif()
endforeach()
