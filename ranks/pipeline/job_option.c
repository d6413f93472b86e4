/* The table of a job's options: flag, short form, value, default and
 * help of each (job_option.h), in JOB_OPT_* order, and their other
 * spellings; job_params.c sets them and job_check.c checks them. */
#include "job_option.h"

#include <string.h>

#include "job_limits.h"
#include "lora_spec.h"
#include "video_out.h"

static const job_option table[JOB_OPT_COUNT] = {
    {JOB_OPT_MODEL, "model", 'm', "MODEL", NULL, 0, "model file or synth:PRESET[:SEED] (required)"},
    {JOB_OPT_COND, "cond", 'c', "FILE", NULL, 1,
     "HDF5 with 'context' float32 [L, 4096], L <= 512, and, when\n"
     "--cfg is not 1, 'context_null' (the encoded negative\n"
     "prompt); from 'staticpipe encode' or launch/encode_prompt.py\n"
     "(required without --jobs or --prompt)"},
    {JOB_OPT_FRAMES, "frames", 'f', "N", "81", 1, "frames, 4k+1, 1.." STR(JOB_FRAMES_MAX) "; at most 2^31 tokens\n"
     "(frames and size together); a TI2V model's default: 121"},
    {JOB_OPT_SIZE, "size", 's', "HxW", "480x832", 1,
     "height x width in pixels, multiples of 16, each\n"
     "16.." STR(JOB_SIDE_MAX) "; also W*H, the Wan repository's form\n"
     "(832*480 is 480x832); a TI2V model's: multiples of 32,\n"
     "default 704x1280"},
    {JOB_OPT_STEPS, "steps", 'n', "N", "50", 1, "sampling steps, 1.." STR(JOB_STEPS_MAX)},
    {JOB_OPT_CFG, "cfg", 'g', "G", "5", 1,
     "guidance scale, 0.." STR(JOB_CFG_MAX) "; 1 runs the conditional branch only,\n"
     "any other value 2 branches = 2 micro-batches; a two-expert\n"
     "model (Wan 2.2 A14B) takes G for both experts or HIGH,LOW\n"
     "(4,3 published, its default)"},
    {JOB_OPT_SHIFT, "shift", 0, "S", "5", 1,
     "schedule shift, " STR(JOB_SHIFT_MIN) ".." STR(JOB_SHIFT_MAX) " (a two-expert\n"
     "model's: 12)"},
    {JOB_OPT_SAMPLER, "sampler", 0, "NAME", "unipc", 1,
     "unipc (the published UniPC, order 2, bh2) or euler"},
    {JOB_OPT_SEED, "seed", 0, "K", "0", 1,
     "noise seed, 0..2^64-1: Philox keyed by element index, the\n"
     "same noise on every machine and rank count; not PyTorch's\n"
     "torch.randn stream (to share noise with another program:\n"
     "--save-noise, --noise)"},
    {JOB_OPT_NOISE, "noise", 0, "FILE", NULL, 1,
     "initial noise: dataset 'noise' float32 [16, F, H/8, W/8],\n"
     "or a ComfyUI FILE.latent; overrides --seed"},
    {JOB_OPT_SAVE_NOISE, "save-noise", 0, "FILE", NULL, 0,
     "write the initial noise (dataset 'noise') to FILE, to start\n"
     "another run or another implementation from the same noise\n"
     "(FILE.latent: a ComfyUI latent file)"},
    {JOB_OPT_OUT, "out", 'o', "FILE", NULL, 1,
     "output: dataset 'latents' float32 [16, F, H/8, W/8] with the\n"
     "settings as attributes, and a preview FILE.png; both written\n"
     "atomically by the last rank (required without --jobs);\n"
     "FILE.latent: a ComfyUI latent file (the VAE's raw space)"},
    {JOB_OPT_JOBS, "jobs", 0, "FILE", NULL, 0,
     "many jobs, one model load: one job per line of key=value\n"
     "fields, '#' starts a comment:\n"
     "  cond=FILE | prompt=\"TEXT\" [negative=\"TEXT\"] (needs --t5)\n"
     "  out=FILE [seed=K | noise=FILE] [frames=N]\n"
     "  [size=HxW] [steps=N] [cfg=G] [shift=S] [sampler=NAME]\n"
     "  [video=FILE] [fps=N] (video= needs --vae) [boundary=B]\n"
     "  [cache=C] [image=FILE | image-latents=FILE] [max-area=A]\n"
     "keys left out take the values of the flags above; jobs run\n"
     "in order, up to one per rank in flight together when they\n"
     "share latent shape and steps (their micro-batches fill the\n"
     "pipeline; each result equals a separate run); a bad line or\n"
     "a failed job is reported and the rest go on; a summary at\n"
     "the end; exit status non-zero when any job failed.\n"
     "FILE '-' (standard input) or a named pipe: a queue; each line\n"
     "is read, checked and run as it arrives, one job at a time,\n"
     "the model loaded once; the end of the input ends the run.\n"
     "The plan is made before the first line from --frames, --size\n"
     "and --cfg: a line larger than them, or with cfg when --cfg is\n"
     "1, or with lora= other than --lora, fails alone; a line's\n"
     "image-latents= must be of that latent grid (TI2V: its first\n"
     "frame); image= fails (encode it beforehand: its encoder runs\n"
     "before the model is placed)"},
    {JOB_OPT_BUDGET, "budget", 'b', "STR", "auto", 0,
     "memory budget per rank; see 'staticpipe plan --help' for\n"
     "the forms (bytes, ratio, fraction, auto)"},
    {JOB_OPT_DEVICE, "device", 'd', "DEV", "auto", 0,
     "auto (cuda when a GPU is visible), cuda or cpu"},
    {JOB_OPT_DEVICES, "devices", 0, "LIST", NULL, 0,
     "CUDA devices to use, e.g. 0,2: a rank takes LIST[local rank\n"
     "mod its length] (default: local rank mod the devices\n"
     "visible; CUDA_VISIBLE_DEVICES is honoured)"},
    {JOB_OPT_ATTN, "attn", 0, "NAME", "auto", 0,
     "CUDA attention: auto (fa3 on sm_90 for head dim 128 and\n"
     "at least 32,760 keys, where it measured faster; else cudnn\n"
     "where cuDNN takes the shape, else flash), cudnn, flash (own\n"
     "kernel), simple (the reference: cuBLASLt GEMMs, exact\n"
     "softmax), fa3 (own Hopper kernel: sm_90 and a build for 90;\n"
     "elsewhere what auto does there), fa3-int8 (its 8-bit form,\n"
     "the 8-bit attention: K smoothed, Q and K int8 per tile, P V\n"
     "bf16; sm_90 only, never chosen by auto; shapes of head dim\n"
     "128 with fewer than 32,760 keys, the 512-key cross-attention,\n"
     "run what auto runs, where 8-bit measured slower), fa3-fp8\n"
     "(all-8-bit: fa3-int8's Q K^T, P and V in e4m3 for P V, V\n"
     "scaled per channel; sm_90 only, the same shapes as fa3-int8;\n"
     "the fastest: 840 TFLOP/s against fa3-int8's 730 on an H100,\n"
     "but about 3e-2 from exact attention against fa3-int8's 1e-2:\n"
     "kernels/cuda/sm90a)"},
    {JOB_OPT_TRANSPORT, "transport", 0, "T", "auto", 0,
     "auto (nccl when every rank has a GPU of its own and the\n"
     "stages run on GPUs, else mpi), mpi or nccl"},
    {JOB_OPT_TIMEOUT, "timeout", 0, "S", "300", 0,
     "longest any rank may go without hearing from a peer it\n"
     "waits on, seconds; ranks exchange heartbeats, so slow work\n"
     "never trips it, a dead, stopped or deadlocked rank does and\n"
     "the whole job ends; also bounds MPI start-up (MPI_Init);\n"
     STR(JOB_TIMEOUT_MIN) ".." STR(JOB_TIMEOUT_MAX)},
    {JOB_OPT_LOG_DIR, "log-dir", 0, "DIR", NULL, 0, "also write each rank's log to DIR/rank-N.log"},
    {JOB_OPT_NO_PREVIEW, "no-preview", 0, NULL, NULL, 0, "do not write FILE.png"},
    {JOB_OPT_NO_VERIFY, "no-verify", 0, NULL, NULL, 0,
     "do not check the weights' checksums while loading"},
    {JOB_OPT_TRACE, "trace", 0, "FILE", NULL, 0,
     "a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev):\n"
     "one process per rank, spans for embed, blocks, head,\n"
     "sampler, every wait on a peer and every step; NVTX ranges\n"
     "with the CUDA backend; written by rank 0 at the end"},
    {JOB_OPT_PROFILE, "profile", 0, NULL, NULL, 0,
     "CUDA: time every op of every block; after each call of a\n"
     "stage's blocks, each op's mean time against its floor"},
    {JOB_OPT_ORDER, "order", 0, "O", "auto", 0,
     "order of work at a stage: auto (the planner's choice by\n"
     "predicted step time), micro (micro-batch-major: stages\n"
     "overlap on different micro-batches; a streamed block is\n"
     "copied once per micro-batch) or block (block-major: each\n"
     "block runs every micro-batch of the step while on the GPU,\n"
     "copied once per step; no overlap between stages in a step)"},
    {JOB_OPT_STREAM_FRAC, "stream-frac", 0, "F", NULL, 0,
     "stream at least ceil(F x its blocks), 0..1, of each rank's\n"
     "blocks from pinned host memory, the largest first, whatever\n"
     "the budget allows; the budget still holds (default: the\n"
     "budget decides what streams)"},
    {JOB_OPT_CHUNK_ROWS, "chunk-rows", 0, "N", NULL, 0,
     "process the block transients in chunks of at most N tokens,\n"
     "1..2^" STR(JOB_CHUNK_ROWS_LOG2) " (default: the planner's choice, unchunked when the\n"
     "budget allows); latents are the same either way"},
    {JOB_OPT_MEM_TRACE, "mem-trace", 0, NULL, NULL, 0,
     "CUDA: per block, device memory in use before and after and\n"
     "the arena's peak, beside the planner's prediction, as a\n"
     "table and as counters in --trace (synchronises each block)"},
    {JOB_OPT_QUIET, "quiet", 'q', NULL, NULL, 0, "no progress lines"},
    {JOB_OPT_VAE, "vae", 0, "VAE", NULL, 0,
     "the VAE: the decoder of --video, the encoder of --image (a\n"
     "file from convert or init, or synth:wan2.1-vae[-tiny][:SEED];\n"
     "a TI2V model's is the Wan 2.2 VAE: synth:wan2.2-vae[-tiny])"},
    {JOB_OPT_VIDEO, "video", 0, "FILE", NULL, 1,
     "also decode the latents with --vae into FILE: .mp4, .mkv,\n"
     ".mov (H.264), .webm (VP9) through FFmpeg's libraries, or .h5\n"
     "(dataset 'video' float32 [3, T, H, W] in [-1, 1]); written\n"
     "atomically by the last rank after the latents"},
    {JOB_OPT_FPS, "fps", 0, "N", STR(VIDEO_OUT_DEFAULT_FPS), 1,
     "frames per second of the video, an integer 1.." STR(JOB_FPS_MAX) " (a TI2V\n"
     "model's default: 24)"},
    {JOB_OPT_VAE_PRECISION, "vae-precision", 0, "P", "bf16", 0,
     "CUDA VAE decoder: bf16 (weights and activations, fp32\n"
     "accumulation), fp32, or tf32: fp32 with the convolutions\n"
     "and the attention's GEMMs on the TF32 tensor cores, which\n"
     "round their inputs to 10-bit mantissas (PyTorch's default\n"
     "for convolutions; about 1e-3 relative error); the CPU\n"
     "decoder is fp32"},
    {JOB_OPT_LORA, "lora", 0, "SPEC", NULL, 0,
     "FILE[:STRENGTH][@high|@low]: apply a LoRA (safetensors with\n"
     "ComfyUI/kohya, diffusers/PEFT or official keys: lora_down/up\n"
     "or lora_A/B and alpha, diff, diff_b) at STRENGTH (default 1,\n"
     "-1000..1000);\n"
     "@high/@low apply it to one expert of a two-expert model\n"
     "(Wan 2.2: the high- or the low-noise one; without @, both),\n"
     "merged or bypassed;\n"
     "repeatable, at most " STR(RANK_LORA_MAX) ", applied in the order given;\n"
     "a --jobs line's own lora= keys (repeatable, lora=none for\n"
     "none) replace these for that job"},
    {JOB_OPT_LORA_MODE, "lora-mode", 0, "MODE", "auto", 0,
     "merged: added into the weights at load, no cost per step;\n"
     "bypass: base weights kept, B (A x) added after each linear\n"
     "layer of the blocks (lora_down/up pairs there only), so\n"
     "--jobs lines switch LoRAs without reloading; auto: merged when\n"
     "every job has the same LoRAs, bypass when --jobs lines name\n"
     "different ones or the weights are quantized and run in bf16\n"
     "(a GGUF file's: merged is refused there)"},
    {JOB_OPT_TIMESTEPS, "timesteps", 0, "LIST", NULL, 1,
     "explicit schedule, e.g. 1000,750,500,250: integer points of\n"
     "the training schedule, 1..1000, strictly decreasing, shifted\n"
     "by --shift; sets --steps to its length (for distilled\n"
     "few-step models)"},
    {JOB_OPT_SIGMAS, "sigmas", 0, "LIST", NULL, 1,
     "explicit schedule of noise levels in (0, 1], strictly\n"
     "decreasing, a final 0 optional; used as given (no shift);\n"
     "sets --steps to its length"},
    {JOB_OPT_PROBE_LINKS, "probe-links", 0, NULL, NULL, 0,
     "before sampling, time the activation message between each\n"
     "pair of neighbouring stages (a few round trips; run --json\n"
     "reports link_gbs per rank); bench passes it"},
    {JOB_OPT_BOUNDARY, "boundary", 0, "B", NULL, 1,
     "two-expert model: a step whose timestep t >= B x 1000 runs\n"
     "the high-noise expert, the others the low-noise one; 0 < B < 1\n"
     "(default: the model's, 0.875 for Wan 2.2 A14B)"},
    {JOB_OPT_T5, "t5", 0, "T5", NULL, 0,
     "the text encoder of --prompt and prompt= (a UMT5-XXL file\n"
     "from convert, its tokenizer inside): rank 0 encodes every\n"
     "prompt before the model is placed (on its GPU when --device\n"
     "is cuda, else on the CPU), then frees the encoder"},
    {JOB_OPT_PROMPT, "prompt", 'p', "TEXT", NULL, 1,
     "the prompt, instead of --cond (needs --t5); the context is\n"
     "the one 'staticpipe encode' writes, so the latents equal a\n"
     "run of its --cond file bit for bit; a --jobs line's\n"
     "prompt=\"TEXT\" (double quotes, \\\" and \\\\ inside)"},
    {JOB_OPT_NEGATIVE, "negative", 0, "TEXT", NULL, 1,
     "the negative prompt of --prompt, for --cfg other than 1\n"
     "(default, or when blank: Wan's own, as encode --help shows)"},
    {JOB_OPT_LAYOUT, "layout", 0, "L", "pipeline", 0,
     "the ranks as a grid RxSxU, R x S x U = ranks (e.g. 2x1x2):\n"
     "R replicas of the model, each running its share of a step's\n"
     "micro-batches (the CFG branches, the videos of --jobs in\n"
     "flight), x S pipeline stages splitting the blocks, x U\n"
     "sequence-parallel ranks per stage (Ulysses: each holds the\n"
     "stage's blocks and 1/U of the tokens; U divides the heads);\n"
     "R at most the micro-batches of a step. pipeline: 1 x ranks\n"
     "x 1. auto: the planner's choice (memory first, then the\n"
     "smallest predicted step: its multi-GPU figures are\n"
     "predictions);\n"
     "plan --layout auto shows it. The latents are bit-identical\n"
     "for every layout"},
    {JOB_OPT_SPEED, "speed", 0, "LIST", NULL, 0,
     "relative speeds in (0, " STR(JOB_SPEED_MAX) "], comma-separated (e.g.\n"
     "1,3): one per rank (a replica runs at its slowest rank's) or\n"
     "one per replica\n"
     "of --layout. Each replica takes a share of a step's\n"
     "micro-batches in proportion: at least one each, then each\n"
     "next to the replica that would finish it first (two CFG\n"
     "branches on two replicas: 1:1 whatever the speeds; the\n"
     "videos of --jobs in flight add two each). Default: equal.\n"
     "The planner takes them as the ranks' speeds too (its block\n"
     "split, the layout --layout auto chooses; with auto give one\n"
     "per rank). The latents are the same whatever the speeds"},
    {JOB_OPT_PRECISION, "precision", 0, "P", NULL, 0,
     "the DiT blocks' linear layers: bf16 (the weights as the file\n"
     "holds them, any stored format dequantised: on a GPU right\n"
     "before each GEMM; the CPU computes in fp32), fp8 (e4m3\n"
     "weights, a scale per output channel, quantised at load from\n"
     "a bf16 or fp32 file as convert --dtype fp8 does, and their\n"
     "inputs quantised per token: MODEL.md \"fp8 weights\"; on a\n"
     "GPU sm_89 or sm_90) or int8 (the same with int8 codes,\n"
     "\"int8 weights\"); a merged --lora is merged before the\n"
     "weights are quantised (an fp8 or int8 file's dequantised,\n"
     "merged in fp32 and quantised again), a bypassed one applied\n"
     "to the quantised input; default: the file's (fp8 or int8\n"
     "for a file of convert or init --dtype fp8 or int8, bf16 for\n"
     "any other: a GGUF file's run in bf16 only); plan counts a\n"
     "block on a GPU in its stored formats"},
    {JOB_OPT_FP8_ACCUM, "fp8-accum", 0, "A", "full", 0,
     "how --precision fp8's GEMMs accumulate on the GPU: full\n"
     "(cuBLASLt promotes the tensor cores' partial sums to full\n"
     "fp32 at intervals) or fast (cuBLASLt's fast accumulation:\n"
     "no such promotion; on an H100 the 14B block's GEMMs took\n"
     "0.54x bf16's time against full's 0.72x, at GEMM error\n"
     "3.5e-3 against 1.7e-3: MODEL.md \"fp8 weights\"). fast\n"
     "needs --precision fp8 on an sm_90 GPU (the scales inside\n"
     "cuBLASLt's GEMM); refused with int8 or bf16, on sm_89 and\n"
     "on the CPU, which accumulates in full fp32 only"},
    {JOB_OPT_CACHE, "cache", 0, "C", "off", 1,
     "step caching: off, teacache:T or magcache:T. A skipped\n"
     "step of a CFG branch reuses the residual out - in of the\n"
     "whole transformer (all blocks) kept from the branch's last\n"
     "computed step: in + R goes to the head. teacache: the\n"
     "relative L1 change of the time embedding from step to step,\n"
     "rescaled by TeaCache4Wan2.1's polynomial and accumulated;\n"
     "skip while the sum is below T (published T: 1.3B 0.05 and\n"
     "0.08, 14B 0.14 and 0.2; random weights need ~1e3). magcache:\n"
     "MagCache4Wan2.1's magnitude ratios (50 steps, nearest-\n"
     "interpolated to other counts), the accumulated error |1 -\n"
     "ratio| below T, at most 2 skips in a row, the first 20% of\n"
     "the forward calls kept (published T: 0.12). Constants of Wan\n"
     "2.1 T2V 14B for width 5120, else 1.3B's. Never skipped: the\n"
     "first and the last step, a Wan 2.2 expert's first step (no\n"
     "residual crosses the switch). T 0 skips nothing (latents\n"
     "bit-identical to off); every layout and rank count gives the\n"
     "same latents. Memory: the last stage keeps one residual\n"
     "(tokens x dim fp32) per micro-batch of a step, the first\n"
     "stage one copy of each one's input (plan --cache counts\n"
     "both)"},
    {JOB_OPT_JSON, "json", 'j', NULL, NULL, 0,
     "JSON lines on stdout, each flushed at once: with --jobs one\n"
     "{\"job\": {...}} per finished job (line, status ok or error,\n"
     "the error line, cond or prompt and negative, out, preview,\n"
     "video, seed or noise, frames, size, steps, cfg, shift,\n"
     "sampler, schedule, seconds), then at the end the summary (the\n"
     "plan, and per rank its blocks, bytes loaded and times)"},
    {JOB_OPT_IMAGE, "image", 0, "FILE", NULL, 1,
     "image to video (an I2V or TI2V model: Wan 2.2 I2V-A14B,\n"
     "TI2V-5B): the first frame, a PNG or JPEG (8-bit, read as\n"
     "RGB); prepared as the published pipelines do (I2V.md) and\n"
     "encoded with --vae's encoder on rank 0 before the model is\n"
     "placed. The size comes from the image and --max-area (I2V:\n"
     "the latent grid of its aspect ratio, bicubic resize; TI2V:\n"
     "multiples of 32, LANCZOS resize and centre crop): no --size"},
    {JOB_OPT_IMAGE_LATENTS, "image-latents", 0, "FILE", NULL, 1,
     "the image already encoded, instead of --image: HDF5 dataset\n"
     "'latents' float32; I2V: [16, F, H/8, W/8], the Wan 2.1 VAE's\n"
     "latents of the resized image followed by frames - 1 zero\n"
     "frames (F gives the frames); TI2V: [48, 1, H/16, W/16], the\n"
     "Wan 2.2 VAE's of the image alone. The size comes from it"},
    {JOB_OPT_MAX_AREA, "max-area", 0, "A", NULL, 1,
     "the pixels of the video an --image sets the size of, an\n"
     "integer " STR(JOB_AREA_MIN) "..2^" STR(JOB_AREA_LOG2) " or HxW (the Wan\n"
     "repository's --size, 720*1280); default: the model's\n"
     "(I2V-A14B 720*1280, TI2V-5B 704*1280)"},
};

/* The Wan repository's generate.py and diffusers' spellings (run takes
 * them; --size 832*480 is job_parse_size_hw's). */
static const job_option_alias aliases[] = {
    {"sample_steps", JOB_OPT_STEPS},       {"frame_num", JOB_OPT_FRAMES},
    {"num_frames", JOB_OPT_FRAMES},        {"sample_guide_scale", JOB_OPT_CFG},
    {"guidance_scale", JOB_OPT_CFG},       {"sample_shift", JOB_OPT_SHIFT},
    {"base_seed", JOB_OPT_SEED},           {"save_file", JOB_OPT_OUT},
    {"sample_solver", JOB_OPT_SAMPLER},    {"negative_prompt", JOB_OPT_NEGATIVE},
    {"num_inference_steps", JOB_OPT_STEPS},
};

const job_option *job_option_get(int id) {
  return id >= 0 && id < JOB_OPT_COUNT ? &table[id] : NULL;
}

const job_option *job_option_find(const char *name) {
  for (int i = 0; i < JOB_OPT_COUNT; i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

int job_option_repeatable(int id) { return id == JOB_OPT_LORA; }

const job_option_alias *job_option_aliases(int *n) {
  *n = (int)(sizeof aliases / sizeof aliases[0]);
  return aliases;
}
