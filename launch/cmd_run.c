/* staticpipe run: sample a clip, on one process or as a pipeline of MPI
 * ranks (mpirun -np N staticpipe run ...): the job loop. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "inputs.h"
#include "log.h"
#include "model_plan.h"
#include "noise.h"
#include "pipeline.h"
#include "preview.h"
#include "run.h"
#include "sampler.h"
#include "trace.h"
#include "commands.h"

/* Loads this rank's blocks for the job's latent shape unless they already
 * are. A failure here ends the run (the model is bad for every job). */
static int ensure_stage(run_ctx *x, const int64_t lat[4]) {
  if (x->stage && memcmp(x->stage_lat, lat, sizeof x->stage_lat) == 0) return SP_OK;
  if (x->stage && x->w->rank == 0)
    sp_log_info("run: the latent shape changes: every rank reloads its blocks");
  rank_stage_free(x->stage);
  x->stage = NULL;
  comm_set_phase("loading its weights");
  const plan_rank *pr = &x->p->r[x->w->rank];
  const int has_prev = x->w->rank > 0, has_next = x->w->rank < x->w->size - 1;
  const int nbuf = plan_act_buffers(pr->order, x->prompts, has_prev, has_next);
  rank_stage_cfg scfg = {.first_block = pr->first_block, .last_block = pr->last_block,
                         .embed = x->w->rank == 0, .head = x->w->rank == x->w->size - 1,
                         .prompts = x->prompts, .lat_f = lat[1], .lat_h = lat[2],
                         .lat_w = lat[3], .device = x->o->dev,
                         .cuda_device = x->o->cuda_device, .attn = x->o->attn,
                         .streamed = &x->p->streamed[pr->first_block],
                         .prefetch_depth = pr->prefetch_depth, .profile = x->o->profile,
                         .act_buffers = nbuf, .chunk_rows = pr->chunk_rows,
                         .mem_trace = x->o->mem_trace,
                         .plan_peak_bytes = (double)pr->peak_bytes};
  double t0 = comm_now();
  int rc = rank_stage_load(x->m, &scfg, &x->stage, &x->sum.bytes_loaded);
  x->sum.load_s += comm_now() - t0;
  if (rc == SP_OK) x->sum.weights_s += rank_stage_get_stats(x->stage)->weights_s;
  if ((rc = run_phase(x->w, rc, "loading its weights")) != SP_OK) return rc;
  memcpy(x->stage_lat, lat, sizeof x->stage_lat);
  return SP_OK;
}

/* Samples g jobs of one latent shape and step count together (their
 * micro-batches fill the pipeline), whose inputs rank 0 holds in ins, and
 * writes their outputs; rcs[q] gets job q's status. Sets *fatal when the
 * run cannot go on (the weights failed to load). Returns the worst. */
static int run_group(run_ctx *x, const rank_jobspec *const *js, job_inputs *ins, int g,
                     const char *then, int *fatal, int *rcs) {
  const comm_world *w = x->w;
  const wan_config *c = &rank_model_get_info(x->m)->config;
  int64_t lat[4];
  run_job_latent(js[0], lat);
  const int64_t n = lat[0] * lat[1] * lat[2] * lat[3];
  int rc = ensure_stage(x, lat);
  for (int q = 0; q < g; q++) rcs[q] = rc;
  if (rc != SP_OK) {
    *fatal = 1;
    return rc;
  }
  comm_set_phase("sampling");
  /* The embedded context, once per prompt, from stage 0 to every stage;
   * job q's prompts take slots from q * slots_per_job. */
  const size_t ctx_floats = (size_t)(c->text_len * c->dim);
  float *ctx_emb = sp_xmalloc(ctx_floats * sizeof(float));
  rank_job jobs[RANK_PIPE_MAX_JOBS];
  float *sigmas[RANK_PIPE_MAX_JOBS] = {0}, *out[RANK_PIPE_MAX_JOBS] = {0};
  int64_t *ts[RANK_PIPE_MAX_JOBS] = {0};
  for (int q = 0; q < g && rc == SP_OK; q++) {
    const rank_jobspec *j = js[q];
    for (int k = 0; k < run_job_micro(j); k++) {
      if (w->rank == 0)
        rank_stage_embed_text(x->stage, ins[q].ctx[k].data, ins[q].ctx[k].dims[0], ctx_emb);
      comm_bcast(w, ctx_emb, ctx_floats * sizeof(float), 0);
      rank_stage_set_prompt(x->stage, q * x->slots_per_job + k, ctx_emb);
    }
    /* The initial latent reaches the last stage, which runs the sampler. */
    if (w->rank != 0) {
      ins[q].noise.numel = n;
      ins[q].noise.data = sp_xmalloc((size_t)n * sizeof(float));
    }
    comm_bcast(w, ins[q].noise.data, (size_t)n * sizeof(float), 0);
    sigmas[q] = sp_xmalloc((size_t)(j->steps + 1) * sizeof(float));
    ts[q] = sp_xmalloc((size_t)j->steps * sizeof(int64_t));
    out[q] = sp_xmalloc((size_t)n * sizeof(float));
    rc = rank_schedule_make(j->steps, j->shift, sigmas[q], ts[q]);
    jobs[q] = (rank_job){{lat[0], lat[1], lat[2], lat[3]}, j->steps, sigmas[q], ts[q],
                         j->sampler, (float)j->cfg, ins[q].noise.data, out[q],
                         q * x->slots_per_job};
  }
  free(ctx_emb);
  if (rc == SP_OK) {
    rank_pipe_stats st = {0};
    const uint64_t h2d0 = rank_stage_get_stats(x->stage)->h2d_bytes;
    rc = rank_pipeline_sample(w, x->tp, x->stage, jobs, g, x->block_major, x->o->timeout,
                              w->rank == 0 && !x->o->quiet, &st);
    x->sum.compute_s += st.compute_s;
    x->sum.queue_s += st.queue_s;
    x->sum.wait_s += st.wait_s;
    x->sum.send_s += st.send_s;
    x->sum.sample_s += st.sample_s;
    x->sum.first_step_s += st.first_step_s;
    x->sum.groups++;
    x->sum.steps += st.steps;
    const rank_stage_stats *ss = rank_stage_get_stats(x->stage);
    x->sum.h2d_bytes += ss->h2d_bytes - h2d0;
    x->sum.streamed = ss->streamed;
    x->sum.arena_bytes = ss->arena_bytes;
    x->sum.device_in_use = ss->device_in_use;
    x->sum.device_peak = ss->device_peak;
  }
  rc = comm_phase_end(w, rc, "sampling", then);
  int worst = rc;
  for (int q = 0; q < g; q++) {
    rcs[q] = rc;
    if (rc != SP_OK) continue;
    comm_set_phase("writing the output");
    int r = SP_OK;
    if (w->rank == w->size - 1) {
      r = run_write_output(x->o, js[q], rank_model_get_info(x->m), lat, out[q]);
      if (r == SP_OK)
        sp_log_info("run: wrote %s%s", js[q]->out,
                    x->o->preview ? " and its .png preview" : "");
    }
    rcs[q] = comm_phase_end(w, r, "writing the output", then);
    if (rcs[q] > worst) worst = rcs[q];
  }
  for (int q = 0; q < g; q++) {
    free(sigmas[q]);
    free(ts[q]);
    free(out[q]);
  }
  return worst;
}

/* Rank 0 reads the jobs file; every rank gets the same list. */
static int read_jobs(const comm_world *w, const run_opts *o, rank_jobspec **jobs, int *n) {
  comm_set_phase("reading the jobs file");
  int rc = SP_OK;
  int count = 0;
  rank_jobspec *list = NULL;
  if (w->rank == 0) rc = rank_jobs_read(o->jobs, &o->job, &list, &count);
  if ((rc = run_phase(w, rc, "reading the jobs file")) != SP_OK) {
    free(list);
    return rc;
  }
  comm_bcast(w, &count, sizeof count, 0);
  if (w->rank != 0) list = sp_xcalloc((size_t)count, sizeof *list);
  comm_bcast(w, list, (size_t)count * sizeof *list, 0);
  *jobs = list;
  *n = count;
  return SP_OK;
}

int cmd_run(int argc, char **argv) {
  comm_world w;
  comm_init(&argc, &argv, 0, &w);
  run_opts o;
  int help = 0;
  /* Every rank parses the same arguments and reaches the same verdict; only
   * rank 0 speaks. */
  if (w.rank != 0) sp_log_set_level(-1);
  int rc = run_parse(argc, argv, &o, &help);
  sp_log_set_level(1);
  if (help && w.rank == 0) run_usage(stdout);
  if (help || rc != SP_OK) {
    comm_finalize(&w);
    return rc;
  }
  if (o.quiet) sp_log_set_level(0);

  run_ctx x = {.w = &w, .o = &o};
  rank_jobspec *jobs = NULL;
  int njobs = 0, single = o.jobs == NULL;
  job_inputs in0;
  memset(&in0, 0, sizeof in0);
  plan p;
  memset(&p, 0, sizeof p);

  rc = o.log_dir ? comm_log_open_dir(&w, o.log_dir) : SP_OK;
  if ((rc = run_phase(&w, rc, "opening its log file")) != SP_OK) goto done;
  /* From here on a silent or stuck peer ends the job after --timeout. */
  rc = comm_watchdog_start(&w, o.timeout);
  if ((rc = run_phase(&w, rc, "starting the watchdog")) != SP_OK) goto done;

  comm_set_phase("choosing the device");
  rc = run_pick_gpu(&w, &o);
  if ((rc = run_phase(&w, rc, "choosing its device")) != SP_OK) goto done;

  /* CUDA stages keep their activation buffers on the device: NCCL moves
   * them between GPUs of their own, host-staged MPI between ranks that
   * share a GPU (comm/transport.h). */
  comm_transport_kind tk = COMM_TRANSPORT_MPI;
  comm_set_phase("choosing the transport");
  rc = comm_transport_choose(&w, o.transport, o.dev == RANK_DEVICE_CUDA,
                             rank_cuda_device_count(), &tk);
  if (rc == SP_OK) rc = comm_transport_open(&w, tk, o.cuda_device, &x.tp);
  if ((rc = run_phase(&w, rc, "opening the transport")) != SP_OK) goto done;

  comm_set_phase("opening the model");
  rc = rank_model_open(o.model, o.verify, &x.m);
  if ((rc = run_phase(&w, rc, "opening the model")) != SP_OK) goto done;
  const wan_config *c = &rank_model_get_info(x.m)->config;

  if (single) {
    jobs = sp_xcalloc(1, sizeof *jobs);
    jobs[0] = o.job;
    njobs = 1;
  } else if ((rc = read_jobs(&w, &o, &jobs, &njobs)) != SP_OK) {
    goto done;
  }

  /* One plan for every job: the largest latent and, with CFG anywhere, two
   * micro-batches (the split does not change the latents, so a job gives
   * the same result as when it runs alone). */
  plan_workload wl = {0, 0, 0, 1, c->text_len};
  int64_t best_tokens = -1;
  for (int i = 0; i < njobs; i++) {
    if (jobs[i].bad) continue;
    int64_t lat[4];
    run_job_latent(&jobs[i], lat);
    int64_t tokens = lat[1] * (lat[2] / 2) * (lat[3] / 2);
    if (tokens > best_tokens) {
      best_tokens = tokens;
      wl.frames = jobs[i].frames;
      wl.height = jobs[i].height;
      wl.width = jobs[i].width;
    }
    if (run_job_micro(&jobs[i]) == 2) wl.micro_batches = 2;
  }
  /* Prompt slots: each job in flight holds its one or two. Up to one job
   * per stage is in flight: more would fill nothing. */
  x.slots_per_job = wl.micro_batches;
  const int in_flight = single ? 1 : (w.size < RANK_PIPE_MAX_JOBS ? w.size : RANK_PIPE_MAX_JOBS);
  x.prompts = wl.micro_batches * in_flight;
  wl.micro_batches *= in_flight;

  /* One job: its inputs are read and checked before planning, and the plan
   * is for its exact context length. */
  if (single) {
    comm_set_phase("reading the inputs");
    rc = run_read_inputs(&x, &jobs[0], &in0);
    if (w.rank == 0 && rc == SP_OK) wl.context_len = in0.ctx[0].dims[0];
    if ((rc = run_phase(&w, rc, "reading the inputs")) != SP_OK) goto done;
    comm_bcast(&w, &wl.context_len, sizeof wl.context_len, 0);
    run_log_job(&x, &jobs[0]);
  }

  if (o.trace) rank_trace_start(&w, o.trace);
  int failed = 0, done_ok = 0, worst = SP_OK;
  int *job_rc = sp_xcalloc((size_t)njobs, sizeof *job_rc);
  if (best_tokens < 0) {
    rc = SP_ERR_INPUT; /* every line was bad (each already reported) */
    for (int i = 0; i < njobs; i++) job_rc[i] = SP_ERR_INPUT;
    failed = njobs;
    worst = rc;
    goto summary;
  }
  if ((rc = run_make_plan(&w, &o, x.m, &wl, &p)) != SP_OK) {
    free(job_rc);
    goto done;
  }
  x.p = &p;
  x.block_major = p.r[w.rank].order == PLAN_ORDER_BLOCK;
  if (w.rank == 0 && !o.quiet) {
    char table[16384];
    plan_format_table(&p, table, sizeof table);
    fprintf(stderr, "%s", table);
  }

  /* Jobs in flight together (in_flight, above): of one latent shape and
   * step count, in file order. */
  const int gmax = in_flight;
  for (int i = 0; i < njobs;) {
    const rank_jobspec *group[RANK_PIPE_MAX_JOBS];
    job_inputs ins[RANK_PIPE_MAX_JOBS];
    int idx[RANK_PIPE_MAX_JOBS], g = 0, fatal = 0;
    int64_t lat0[4], lat1[4];
    /* Candidates: consecutive jobs matching the first good one. */
    int next = i;
    for (; next < njobs && g < gmax; next++) {
      const rank_jobspec *j = &jobs[next];
      if (j->bad) {
        job_rc[next] = SP_ERR_INPUT;
        continue;
      }
      if (g > 0) {
        run_job_latent(group[0], lat0);
        run_job_latent(j, lat1);
        if (memcmp(lat0, lat1, sizeof lat0) != 0 || j->steps != group[0]->steps) break;
      }
      /* Its inputs, read and checked on rank 0; a bad one fails alone. */
      memset(&ins[g], 0, sizeof ins[g]);
      int r = SP_OK;
      if (single) {
        ins[g] = in0;
        memset(&in0, 0, sizeof in0);
      } else {
        char what[96];
        snprintf(what, sizeof what, "reading the inputs of job %d (line %d)", next + 1, j->line);
        comm_set_phase(what);
        r = comm_phase_end(&w, run_read_inputs(&x, j, &ins[g]), what, "job failed");
        if (r == SP_OK) run_log_job(&x, j);
      }
      if (r != SP_OK) {
        job_rc[next] = r;
        run_inputs_free(&ins[g]);
        continue;
      }
      idx[g] = next;
      group[g++] = j;
    }
    i = next;
    if (g == 0) continue;
    int rcs[RANK_PIPE_MAX_JOBS];
    if (g > 1 && w.rank == 0)
      sp_log_info("run: %d jobs in flight together (lines %d..%d)", g, group[0]->line,
                  group[g - 1]->line);
    run_group(&x, group, ins, g, single ? "stopping" : "job failed", &fatal, rcs);
    for (int q = 0; q < g; q++) {
      job_rc[idx[q]] = rcs[q];
      run_inputs_free(&ins[q]);
    }
    if (fatal) {
      rc = rcs[0];
      free(job_rc);
      goto done;
    }
  }
  for (int i = 0; i < njobs; i++) {
    if (job_rc[i] == SP_OK) {
      done_ok++;
    } else {
      failed++;
      if (job_rc[i] > worst) worst = job_rc[i];
    }
  }
  rc = worst;

summary:
  if (o.trace) {
    int trc = run_phase(&w, rank_trace_finish(&w), "writing the trace");
    if (trc > worst) worst = rc = trc;
  }
  if (!single && w.rank == 0) {
    for (int i = 0; i < njobs; i++)
      if (job_rc[i] != SP_OK)
        sp_log_warn("jobs: %s:%d (out=%s) failed", o.jobs, jobs[i].line,
                    jobs[i].out[0] ? jobs[i].out : "?");
    /* A warning when any failed, so that -q still shows it. */
    if (failed)
      sp_log_warn("jobs: %d of %d done, %d failed (%s)", done_ok, njobs, failed, o.jobs);
    else
      sp_log_info("jobs: %d of %d done, %d failed (%s)", done_ok, njobs, failed, o.jobs);
  }
  free(job_rc);
  if (best_tokens < 0) goto done;

  const plan_rank *pr = &p.r[w.rank];
  x.sum.first = pr->first_block;
  x.sum.last = pr->last_block;
  x.sum.order = x.block_major ? PLAN_ORDER_BLOCK : PLAN_ORDER_MICRO;
  x.sum.plan_peak_bytes = pr->peak_bytes;
  rank_summary *all = sp_xcalloc((size_t)w.size, sizeof *all);
  comm_gather(&w, &x.sum, sizeof x.sum, all, 0);
  if (w.rank == 0 && !o.quiet) {
    fprintf(stderr, "# rank  blocks     order  streamed  loaded_MB  load_s  compute_s  wait_s  "
                    "send_s  host\n");
    for (int r = 0; r < w.size; r++)
      fprintf(stderr, "  %4d  %3d..%-3d  %-5s  %8d  %9.1f  %6.2f  %9.2f  %6.2f  %6.2f  %s\n", r,
              all[r].first, all[r].last, plan_order_name(all[r].order), all[r].streamed,
              (double)all[r].bytes_loaded / 1e6, all[r].load_s, all[r].compute_s, all[r].wait_s,
              all[r].send_s, w.hosts[r]);
  }
  if (w.rank == 0 && o.json) run_print_json(&w, &p, all);
  free(all);
done:
  free(jobs);
  run_inputs_free(&in0);
  rank_stage_free(x.stage);
  rank_model_close(x.m);
  comm_transport_close(x.tp);
  comm_set_phase("finishing");
  comm_finalize(&w);
  comm_log_close();
  return rc;
}
