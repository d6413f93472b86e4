/* The Wan VAE convolutions through cuDNN's backend API (cuda_vae_graph.cuh). */
#include "cuda_vae_graph.cuh"

cudnnBackendDescriptor_t cuda_vae_conv_graph(cudnnHandle_t dnn, kern_dtype dt,
                                             const cuda_vae_conv_key *k, att_builder *b) {
  const cudnnDataType_t t = dt == KERN_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  int To, Ho, Wo;
  cuda_vae_conv_out_dims(k, &To, &Ho, &Wo);
  const int64_t T = k->T, H = k->H, W = k->W, ci = k->ci, co = k->co;
  const int64_t kt = k->kt, kh = k->kh, kw = k->kw;
  /* dims in cuDNN's (N, C, D, H, W) order, strides of channels-last
   * buffers; the filter (K, C, T, R, S) stored (K, T, R, S, C) */
  const int64_t xd[5] = {1, ci, T, H, W}, xs[5] = {T * H * W * ci, 1, H * W * ci, W * ci, ci};
  const int64_t wd[5] = {co, ci, kt, kh, kw},
                ws[5] = {kt * kh * kw * ci, 1, kh * kw * ci, kw * ci, ci};
  const int64_t yd[5] = {1, co, To, Ho, Wo},
                ys[5] = {(int64_t)To * Ho * Wo * co, 1, (int64_t)Ho * Wo * co, Wo * co, co};
  cudnnBackendDescriptor_t X = att_tensor_nd(b, CUDA_VAE_UID_X, 5, xd, xs, t, 0, 0);
  cudnnBackendDescriptor_t Wt = att_tensor_nd(b, CUDA_VAE_UID_W, 5, wd, ws, t, 0, 0);
  cudnnBackendDescriptor_t Y = att_tensor_nd(b, CUDA_VAE_UID_Y, 5, yd, ys, t, 0, 0);
  const int64_t nsp = 3, pad[3] = {0, k->valid ? 0 : kh / 2, k->valid ? 0 : kw / 2};
  const int64_t stride[3] = {k->st, k->ss, k->ss}, dil[3] = {1, 1, 1};
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnBackendDescriptor_t cd = att_new(b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "conv desc");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "conv comp");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
          "conv mode");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp, "conv dims");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 3, dil, "conv dilations");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 3, stride,
          "conv strides");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 3, pad, "conv pre pad");
  att_set(b, cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 3, pad, "conv post pad");
  att_fin(b, cd, "conv desc");
  const float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptor_t op =
      att_new(b, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, "conv op");
  att_set(b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &X,
          "conv x");
  att_set(b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &Wt,
          "conv w");
  att_set(b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &Y,
          "conv y");
  att_set(b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd, "conv op desc");
  att_set(b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha,
          "conv alpha");
  att_set(b, op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta,
          "conv beta");
  att_fin(b, op, "conv op");
  cudnnBackendDescriptor_t gr = att_new(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "graph");
  att_set(b, gr, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &dnn, "graph handle");
  att_set(b, gr, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op,
          "graph ops");
  att_fin(b, gr, "operation graph");
  return b->st == CUDNN_STATUS_SUCCESS ? gr : NULL;
}

/* The rule: the bf16 3x3x3 stride-1 convolution of 96 channels to 96 (the
 * Wan 2.1 decoder's full-resolution stage, 120 of a 480p decode's calls)
 * runs engine 62 with tile size 0, tile-K 0, index mode 0, workspace 0 and
 * CGA tiles 8 x 1: on an H100 (cuDNN 9.14, tests/gpu/test_vae_gpu
 * --engines, launch/bench/RESULTS.md) 1.41 ms a call of (6, 480, 832) frames
 * against 3.22 ms for the legacy API's implicit_precomp_gemm (and for the
 * backend heuristic's first configuration), with the same output bits; of
 * a 480p decode's 724 ms of convolutions it saves about 217. A
 * fixed rule, not a timed choice, so every run and rerun takes the same
 * engine; where cuDNN cannot make that configuration's plan (another GPU
 * or cuDNN) the legacy algorithm runs. The other shapes' best engines
 * saved 1-20 ms each or changed the bits; they keep the legacy algorithm. */
static const cuda_vae_engine_cfg full_res_96 = {
    62, 6, {CUDNN_KNOB_TYPE_TILE_SIZE, CUDNN_KNOB_TYPE_TILEK, CUDNN_KNOB_TYPE_IDX_MODE,
            CUDNN_KNOB_TYPE_WORKSPACE, CUDNN_KNOB_TYPE_TILE_CGA_M, CUDNN_KNOB_TYPE_TILE_CGA_N},
    {0, 0, 0, 0, 8, 1}};

const cuda_vae_engine_cfg *cuda_vae_engine_rule(kern_dtype dt, int tf32,
                                                const cuda_vae_conv_key *k) {
  if (dt != KERN_DTYPE_BF16 || tf32) return NULL;
  if (k->kt == 3 && k->kh == 3 && k->kw == 3 && k->st == 1 && k->ss == 1 && !k->valid &&
      k->ci == 96 && k->co == 96)
    return &full_res_96;
  return NULL;
}
