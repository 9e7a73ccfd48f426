/*
 * cffi declarations of the nnopbase (libnnopbase.so) functions, types and status codes the
 * acl-fa driver uses. Parsed by cffi after acl_rt.h (aclDataType, aclFormat, aclrtStream come
 * from there); no #include, no #ifdef. The real headers are C++ (hicann/opbase
 * include/nnopbase/aclnn/), which is why these are written by hand; tests/runtime/test_abi.py checks
 * them against sim/include/aclnn, the simulator's mirror of those headers.
 */

/* ---- aclnn/acl_meta.h : opaque objects and the status type ------------------------------ */
typedef struct aclOpExecutor aclOpExecutor;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclFloatArray aclFloatArray;
typedef struct aclBoolArray aclBoolArray;
typedef int32_t aclnnStatus;

/* ---- aclnn/opdev/op_errno.h : status codes ---------------------------------------------- */
#define ACLNN_SUCCESS 0
#define ACLNN_ERR_PARAM_NULLPTR 161001
#define ACLNN_ERR_PARAM_INVALID 161002
#define ACLNN_ERR_RUNTIME_ERROR 361001
#define ACLNN_ERR_INNER 561000
#define ACLNN_ERR_INNER_INFERSHAPE_ERROR 561001
#define ACLNN_ERR_INNER_TILING_ERROR 561002
#define ACLNN_ERR_INNER_FIND_KERNEL_ERROR 561003
#define ACLNN_ERR_INNER_CREATE_EXECUTOR 561101
#define ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR 561102
#define ACLNN_ERR_INNER_NULLPTR 561103
#define ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND 561107
#define ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND 561112

/* ---- aclnn/acl_meta.h : tensors, arrays, scalars, executors ----------------------------- */
aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData);
aclScalar *aclCreateScalar(void *value, aclDataType dataType);
aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);
aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size);
aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size);
aclnnStatus aclDestroyTensor(const aclTensor *tensor);
aclnnStatus aclDestroyScalar(const aclScalar *scalar);
aclnnStatus aclDestroyIntArray(const aclIntArray *array);
aclnnStatus aclDestroyFloatArray(const aclFloatArray *array);
aclnnStatus aclDestroyBoolArray(const aclBoolArray *array);
aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor);
aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor);

/* ---- aclnn/aclnn_base.h : library init -------------------------------------------------- */
aclnnStatus aclnnInit(const char *configPath);
aclnnStatus aclnnFinalize();
