/* bench's children (bench_child.h). */
#include "bench_child.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "log.h"

extern char **environ;

/* The launcher's words for a run on ranks ranks into av (room for
 * nlaunch + 1 words), then the rank count in the launcher's own spelling,
 * written into count: srun takes --ntasks=N (it has no -np), mpirun and
 * mpiexec -np N. The file name of the first word decides. Returns the
 * words written. */
int bench_launcher_words(char *const *launch, int nlaunch, int ranks, char *count,
                          size_t count_size, char **av) {
  int c = 0;
  for (int i = 0; i < nlaunch; i++) av[c++] = launch[i];
  const char *slash = strrchr(launch[0], '/');
  const char *name = slash ? slash + 1 : launch[0];
  if (strcmp(name, "srun") == 0) {
    snprintf(count, count_size, "--ntasks=%d", ranks);
    av[c++] = count;
  } else {
    snprintf(count, count_size, "%d", ranks);
    av[c++] = "-np";
    av[c++] = count;
  }
  return c;
}

/* Prints argv as one shell line: words with characters the shell would
 * read specially are single-quoted. */
void bench_print_command(char *const *argv) {
  for (int i = 0; argv[i]; i++) {
    const char *w = argv[i];
    int plain = *w != '\0';
    for (const char *p = w; *p && plain; p++)
      plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./:,@%",
                     *p) != NULL;
    fputs(i ? " " : "", stdout);
    if (plain) {
      fputs(w, stdout);
      continue;
    }
    fputc('\'', stdout);
    for (const char *p = w; *p; p++) {
      if (*p == '\'') fputs("'\\''", stdout);
      else fputc(*p, stdout);
    }
    fputc('\'', stdout);
  }
  fputc('\n', stdout);
}

/* Runs argv with stdout to out_path and stderr to log_path; returns the
 * exit status (or 128 + signal). */
int bench_run_child(char *const *argv, const char *out_path, const char *log_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return 127; /* not found or not runnable: the caller says what it means */
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A number field of a JSON object, 0 when absent. */
static double jnum(json_object *o, const char *key) {
  json_object *v;
  return o && json_object_object_get_ex(o, key, &v) ? json_object_get_double(v) : 0.0;
}

/* Fills m (and r's plan figures) from the JSON run wrote; SP_ERR_RUNTIME
 * when there is none. */
int bench_parse_result(const char *path, bench_row *r, bench_meas *m) {
  json_object *j = json_object_from_file(path), *plan, *ranks, *v;
  if (!j || !json_object_is_type(j, json_type_object)) {
    if (j) json_object_put(j);
    return SP_ERR_RUNTIME;
  }
  memset(m, 0, sizeof *m);
  m->step_ms = jnum(j, "step_ms");
  m->steady_ms = jnum(j, "steady_step_ms");
  m->video_s = jnum(j, "sample_s");
  m->steps_per_s = m->video_s > 0 ? jnum(j, "steps") / m->video_s : 0;
  if (json_object_object_get_ex(j, "plan", &plan)) {
    r->predicted_ms = jnum(plan, "predicted_step_ms");
    int nb = (int)jnum(plan, "num_blocks"), ns = 0;
    if (json_object_object_get_ex(plan, "ranks", &ranks) &&
        json_object_is_type(ranks, json_type_array))
      for (size_t i = 0; i < json_object_array_length(ranks); i++)
        if (json_object_object_get_ex(json_object_array_get_idx(ranks, i), "streamed", &v) &&
            json_object_is_type(v, json_type_array))
          ns += (int)json_object_array_length(v);
    r->streamed = nb ? (double)ns / nb : 0;
  }
  double loaded = 0;
  r->h2d_gb = 0;
  if (json_object_object_get_ex(j, "ranks", &ranks) && json_object_is_type(ranks, json_type_array))
    for (size_t i = 0; i < json_object_array_length(ranks); i++) {
      json_object *rk = json_object_array_get_idx(ranks, i);
      if (i == 0 && json_object_object_get_ex(rk, "order", &v))
        snprintf(r->order, sizeof r->order, "%s", json_object_get_string(v));
      if (i == 0) r->act_mb = jnum(rk, "act_bytes") / 1e6;
      r->h2d_gb += jnum(rk, "h2d_bytes_per_step") / 1e9;
      loaded += jnum(rk, "bytes_loaded");
      if (jnum(rk, "load_s") > m->load_s) m->load_s = jnum(rk, "load_s");
      double peak = jnum(rk, "device_peak_bytes"), plan_peak = jnum(rk, "plan_peak_bytes");
      if (peak > 0 && plan_peak > 0 && peak / plan_peak > r->mem_vs_plan)
        r->mem_vs_plan = peak / plan_peak;
      /* Every rank but the last probed the hop to the next one. */
      if (json_object_object_get_ex(rk, "link_gbs", &v) &&
          (m->act_gbs == 0 || json_object_get_double(v) < m->act_gbs))
        m->act_gbs = json_object_get_double(v);
    }
  m->load_gbs = m->load_s > 0 ? loaded / 1e9 / m->load_s : 0;
  json_object_put(j);
  return SP_OK;
}

