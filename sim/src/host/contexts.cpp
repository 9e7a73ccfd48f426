// contexts.cpp -- gert::RuntimeAttrs and the gert contexts over acl_fa_sim::host::NodeData.
#include "exe_graph/runtime/infer_datatype_context.h"
#include "exe_graph/runtime/infer_shape_context.h"
#include "exe_graph/runtime/tiling_context.h"
#include "node_data.h"

namespace gert {

namespace {
// Element `index` of one of the node's per-input/output vectors; nullptr past its end.
template <typename Items>
auto At(Items &items, const size_t index) -> decltype(&items[0]) {
    return index < items.size() ? &items[index] : nullptr;
}

// The element of `items` of an OPTIONAL input by its OpDef index; nullptr when it is absent.
template <typename Items>
auto Optional(const acl_fa_sim::host::NodeData &node, Items &items, const size_t ir_index) -> decltype(&items[0]) {
    const int at = node.Present(ir_index);
    return at < 0 ? nullptr : &items[at];
}
}  // namespace

size_t RuntimeAttrs::GetAttrNum() const { return store_->pointers.size(); }

const void *RuntimeAttrs::GetPointerByIndex(size_t index) const {
    return index < store_->pointers.size() ? store_->pointers[index] : nullptr;
}

const CompileTimeTensorDesc *ExtendedKernelContext::GetInputDesc(const size_t index) const {
    return At(node_->inputDescs, index);
}

const CompileTimeTensorDesc *ExtendedKernelContext::GetOutputDesc(const size_t index) const {
    return At(node_->outputDescs, index);
}

const CompileTimeTensorDesc *ExtendedKernelContext::GetOptionalInputDesc(const size_t ir_index) const {
    return Optional(*node_, node_->inputDescs, ir_index);
}

size_t ExtendedKernelContext::GetComputeNodeInputNum() const { return node_->inputDescs.size(); }

size_t ExtendedKernelContext::GetComputeNodeOutputNum() const { return node_->outputDescs.size(); }

const RuntimeAttrs *ExtendedKernelContext::GetAttrs() const {
    return node_->attrs != nullptr ? &node_->attrs->view : nullptr;
}

const ge::char_t *ExtendedKernelContext::GetNodeType() const { return node_->nodeType.c_str(); }

const ge::char_t *ExtendedKernelContext::GetNodeName() const { return node_->nodeName.c_str(); }

// ---- TilingContext ----
const StorageShape *TilingContext::GetInputShape(const size_t index) const {
    return At(node_->inputShapes, index);
}

const StorageShape *TilingContext::GetOutputShape(const size_t index) const {
    return At(node_->outputShapes, index);
}

const StorageShape *TilingContext::GetOptionalInputShape(const size_t ir_index) const {
    return Optional(*node_, node_->inputShapes, ir_index);
}

const Tensor *TilingContext::GetInputTensor(const size_t index) const {
    return At(node_->inputTensors, index);
}

const Tensor *TilingContext::GetOptionalInputTensor(const size_t ir_index) const {
    return Optional(*node_, node_->inputTensors, ir_index);
}

ge::graphStatus TilingContext::SetTilingKey(const uint64_t tiling_key) {
    node_->tilingKey = tiling_key;
    return ge::GRAPH_SUCCESS;
}

uint64_t TilingContext::GetTilingKey() const { return node_->tilingKey; }

ge::graphStatus TilingContext::SetBlockDim(const uint32_t block_dim) {
    node_->blockDim = block_dim;
    return ge::GRAPH_SUCCESS;
}

uint32_t TilingContext::GetBlockDim() const { return node_->blockDim; }

ge::graphStatus TilingContext::SetScheduleMode(const uint32_t schedule_mode) {
    node_->scheduleMode = schedule_mode;
    return ge::GRAPH_SUCCESS;
}

uint32_t TilingContext::GetScheduleMode() const { return node_->scheduleMode; }

TilingData *TilingContext::GetRawTilingData() {
    return node_->tilingBuffer != nullptr ? reinterpret_cast<TilingData *>(node_->tilingBuffer.get()) : nullptr;
}

size_t *TilingContext::GetWorkspaceSizes(const size_t workspace_count) {
    node_->workspaceSizes.assign(workspace_count, 0);
    return node_->workspaceSizes.data();
}

size_t TilingContext::GetWorkspaceNum() const { return node_->workspaceSizes.size(); }

fe::PlatFormInfos *TilingContext::GetPlatformInfo() const { return node_->platform; }

// ---- InferShapeContext ----
const Shape *InferShapeContext::GetInputShape(const size_t index) const {
    return index < node_->inputShapes.size() ? &node_->inputShapes[index].GetOriginShape() : nullptr;
}

const Shape *InferShapeContext::GetOptionalInputShape(const size_t ir_index) const {
    const int at = node_->Present(ir_index);
    return at < 0 ? nullptr : &node_->inputShapes[at].GetOriginShape();
}

const Tensor *InferShapeContext::GetOptionalInputTensor(const size_t ir_index) const {
    return Optional(*node_, node_->inputTensors, ir_index);
}

Shape *InferShapeContext::GetOutputShape(const size_t index) {
    return index < node_->outputShapes.size() ? &node_->outputShapes[index].MutableOriginShape() : nullptr;
}

// ---- InferDataTypeContext ----
ge::DataType InferDataTypeContext::GetInputDataType(const size_t index) const {
    return index < node_->inputDescs.size() ? node_->inputDescs[index].GetDataType() : ge::DT_UNDEFINED;
}

ge::DataType InferDataTypeContext::GetOutputDataType(const size_t index) const {
    return index < node_->outputDescs.size() ? node_->outputDescs[index].GetDataType() : ge::DT_UNDEFINED;
}

ge::graphStatus InferDataTypeContext::SetOutputDataType(const size_t index, const ge::DataType datatype) {
    if (index >= node_->outputDescs.size()) return ge::GRAPH_FAILED;
    node_->outputDescs[index].SetDataType(datatype);
    return ge::GRAPH_SUCCESS;
}

}  // namespace gert
