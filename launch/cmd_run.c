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
  rank_stage_cfg scfg = {.first_block = pr->first_block, .last_block = pr->last_block,
                         .embed = x->w->rank == 0, .head = x->w->rank == x->w->size - 1,
                         .prompts = x->prompts, .lat_f = lat[1], .lat_h = lat[2],
                         .lat_w = lat[3], .device = x->o->dev,
                         .cuda_device = x->o->cuda_device, .attn = x->o->attn,
                         .streamed = &x->p->streamed[pr->first_block],
                         .prefetch_depth = pr->prefetch_depth};
  double t0 = comm_now();
  int rc = rank_stage_load(x->m, &scfg, &x->stage, &x->sum.bytes_loaded);
  x->sum.load_s += comm_now() - t0;
  if ((rc = run_phase(x->w, rc, "loading its weights")) != SP_OK) return rc;
  memcpy(x->stage_lat, lat, sizeof x->stage_lat);
  return SP_OK;
}

/* Samples one job whose inputs rank 0 holds in in, and writes its output.
 * Sets *fatal when the run cannot go on (the weights failed to load). */
static int run_job(run_ctx *x, const rank_jobspec *j, job_inputs *in, const char *then,
                   int *fatal) {
  const comm_world *w = x->w;
  const wan_config *c = &rank_model_get_info(x->m)->config;
  const int micro = run_job_micro(j);
  int64_t lat[4];
  run_job_latent(j, lat);
  const int64_t n = lat[0] * lat[1] * lat[2] * lat[3];
  int rc = ensure_stage(x, lat);
  if (rc != SP_OK) {
    *fatal = 1;
    return rc;
  }
  comm_set_phase("sampling");
  /* The embedded context, once per prompt, from stage 0 to every stage. */
  const size_t ctx_floats = (size_t)(c->text_len * c->dim);
  float *ctx_emb = sp_xmalloc((size_t)micro * ctx_floats * sizeof(float));
  if (w->rank == 0)
    for (int k = 0; k < micro; k++)
      rank_stage_embed_text(x->stage, in->ctx[k].data, in->ctx[k].dims[0],
                            ctx_emb + (size_t)k * ctx_floats);
  comm_bcast(w, ctx_emb, (size_t)micro * ctx_floats * sizeof(float), 0);
  for (int k = 0; k < micro; k++)
    rank_stage_set_prompt(x->stage, k, ctx_emb + (size_t)k * ctx_floats);
  free(ctx_emb);

  /* The initial latent reaches the last stage, which runs the sampler. */
  if (w->rank != 0) {
    in->noise.numel = n;
    in->noise.data = sp_xmalloc((size_t)n * sizeof(float));
  }
  comm_bcast(w, in->noise.data, (size_t)n * sizeof(float), 0);

  float *sigmas = sp_xmalloc((size_t)(j->steps + 1) * sizeof(float));
  int64_t *ts = sp_xmalloc((size_t)j->steps * sizeof(int64_t));
  float *latents = NULL;
  rc = rank_schedule_make(j->steps, j->shift, sigmas, ts);
  if (rc == SP_OK) {
    latents = sp_xmalloc((size_t)n * sizeof(float));
    rank_job job = {{lat[0], lat[1], lat[2], lat[3]}, j->steps, sigmas, ts, j->sampler,
                    (float)j->cfg, in->noise.data, latents};
    rank_pipe_stats st = {0};
    rc = rank_pipeline_sample(w, x->tp, x->stage, &job, x->o->timeout,
                              w->rank == 0 && !x->o->quiet, &st);
    x->sum.compute_s += st.compute_s;
    x->sum.wait_s += st.wait_s;
    x->sum.send_s += st.send_s;
  }
  free(sigmas);
  free(ts);
  if ((rc = comm_phase_end(w, rc, "sampling", then)) != SP_OK) goto out;

  comm_set_phase("writing the output");
  if (w->rank == w->size - 1) {
    rc = run_write_output(x->o, j, rank_model_get_info(x->m), lat, latents);
    if (rc == SP_OK)
      sp_log_info("run: wrote %s%s", j->out, x->o->preview ? " and its .png preview" : "");
  }
  rc = comm_phase_end(w, rc, "writing the output", then);
out:
  free(latents);
  return rc;
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

  /* The stages exchange host-staged activation messages today (the CUDA
   * stage copies them to and from pinned host buffers), so the transport
   * is MPI; NCCL takes over once the stages hand it device buffers. */
  comm_transport_kind tk = COMM_TRANSPORT_MPI;
  comm_set_phase("choosing the transport");
  rc = comm_transport_choose(&w, o.transport, 0, rank_cuda_device_count(), &tk);
  if (rc == SP_OK) rc = comm_transport_open(&w, tk, w.local_rank, &x.tp);
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
  x.prompts = wl.micro_batches;

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
  if (w.rank == 0 && !o.quiet) {
    char table[16384];
    plan_format_table(&p, table, sizeof table);
    fprintf(stderr, "%s", table);
  }

  for (int i = 0; i < njobs; i++) {
    const rank_jobspec *j = &jobs[i];
    int fatal = 0;
    if (j->bad) {
      job_rc[i] = SP_ERR_INPUT;
    } else if (single) {
      job_rc[i] = run_job(&x, j, &in0, "stopping", &fatal);
    } else {
      char what[96];
      snprintf(what, sizeof what, "reading the inputs of job %d (line %d)", i + 1, j->line);
      comm_set_phase(what);
      job_inputs in;
      memset(&in, 0, sizeof in);
      int r = run_read_inputs(&x, j, &in);
      r = comm_phase_end(&w, r, what, "job failed");
      if (r == SP_OK) {
        run_log_job(&x, j);
        r = run_job(&x, j, &in, "job failed", &fatal);
      }
      run_inputs_free(&in);
      job_rc[i] = r;
    }
    if (job_rc[i] == SP_OK) {
      done_ok++;
    } else {
      failed++;
      if (job_rc[i] > worst) worst = job_rc[i];
    }
    if (fatal) {
      rc = job_rc[i];
      free(job_rc);
      goto done;
    }
  }
  rc = worst;

summary:
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
  rank_summary *all = sp_xcalloc((size_t)w.size, sizeof *all);
  comm_gather(&w, &x.sum, sizeof x.sum, all, 0);
  if (w.rank == 0 && !o.quiet) {
    fprintf(stderr, "# rank  blocks     loaded_MB  load_s  compute_s  wait_s  send_s  host\n");
    for (int r = 0; r < w.size; r++)
      fprintf(stderr, "  %4d  %3d..%-3d  %9.1f  %6.2f  %9.2f  %6.2f  %6.2f  %s\n", r,
              all[r].first, all[r].last, (double)all[r].bytes_loaded / 1e6, all[r].load_s,
              all[r].compute_s, all[r].wait_s, all[r].send_s, w.hosts[r]);
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
