/* The converter's inputs (see convert_impl.h): files, directories and
 * *.safetensors.index.json, and the cross-check of index and shards. */
#include <dirent.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "convert_impl.h"
#include "file_read.h"
#include "log.h"


static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static void add_path(inputs *in, const char *dir, const char *name) {
  if (in->npaths == in->cap) {
    in->cap = in->cap ? in->cap * 2 : 8;
    char **p = realloc(in->paths, (size_t)in->cap * sizeof *p);
    if (!p) sp_fatal("out of memory");
    in->paths = p;
  }
  size_t n = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
  char *s = sp_xmalloc(n);
  if (dir) snprintf(s, n, "%s/%s", dir, name);
  else snprintf(s, n, "%s", name);
  in->paths[in->npaths++] = s;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_directory(inputs *in, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    sp_log_error("%s: cannot open directory: %s", dir, strerror(errno));
    return SP_ERR_INPUT;
  }
  int first = in->npaths;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' && ends_with(e->d_name, ".safetensors")) add_path(in, dir, e->d_name);
  closedir(d);
  if (in->npaths == first) {
    sp_log_error("%s: directory holds no *.safetensors file", dir);
    return SP_ERR_INPUT;
  }
  qsort(in->paths + first, (size_t)(in->npaths - first), sizeof *in->paths, str_cmp);
  return SP_OK;
}

static int add_index(inputs *in, const char *path) {
  char err[1024], *text = NULL;
  json_object *root = NULL;
  int rc = SP_ERR_INPUT;
  FILE *f = NULL;
  if (rank_file_fopen_read(path, &f) != SP_OK) return SP_ERR_INPUT; /* io/file_read.h */
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) ||
      (uint64_t)sb.st_size > RANK_ST_MAX_HEADER) {
    sp_log_error("%s: not a regular file of at most %u bytes", path, RANK_ST_MAX_HEADER);
    goto out;
  }
  size_t n = (size_t)sb.st_size;
  text = sp_xmalloc(n + 1);
  if (fread(text, 1, n, f) != n) {
    sp_log_error("%s: read failed", path);
    rc = SP_ERR_RUNTIME;
    goto out;
  }
  text[n] = '\0';
  if (rank_st_json_parse(text, n, RANK_ST_MAX_HEADER, &root, err, sizeof err) != 0) {
    sp_log_error("%s: %s", path, err);
    goto out;
  }
  json_object *wm = NULL;
  if (!json_object_object_get_ex(root, "weight_map", &wm) ||
      !json_object_is_type(wm, json_type_object) || json_object_object_length(wm) == 0) {
    sp_log_error("%s: no \"weight_map\" object of tensor -> shard file", path);
    goto out;
  }
  /* The shards live beside the index; a name with a '/' could point anywhere. */
  char *dir = sp_xstrdup(path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  else snprintf(dir, strlen(dir) + 1, ".");
  int first = in->npaths;
  json_object_object_foreach(wm, k, v) {
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    if (!s || !*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
        (size_t)json_object_get_string_len(v) != strlen(s)) {
      sp_log_error("%s: weight_map entry for tensor '%.200s' is not a plain file name", path, k);
      free(dir);
      goto out;
    }
    int seen = 0;
    for (int i = first; i < in->npaths && !seen; i++)
      seen = strcmp(in->paths[i] + strlen(dir) + 1, s) == 0;
    if (!seen) add_path(in, dir, s);
    if (in->nwm == in->wmcap) {
      in->wmcap = in->wmcap ? in->wmcap * 2 : 256;
      weight_entry *p = realloc(in->wm, (size_t)in->wmcap * sizeof *p);
      if (!p) sp_fatal("out of memory");
      in->wm = p;
    }
    in->wm[in->nwm].tensor = sp_xstrdup(k);
    in->wm[in->nwm].shard = sp_xstrdup(s);
    in->nwm++;
  }
  free(dir);
  rc = SP_OK;
out:
  json_object_put(root);
  free(text);
  fclose(f);
  return rc;
}

void rank_convert_inputs_free(inputs *in) {
  for (int i = 0; i < in->npaths; i++) free(in->paths[i]);
  free(in->paths);
  for (int i = 0; i < in->nwm; i++) {
    free(in->wm[i].tensor);
    free(in->wm[i].shard);
  }
  free(in->wm);
}

int rank_convert_inputs_resolve(int n, char *const *args, inputs *in) {
  for (int i = 0; i < n; i++) {
    struct stat sb;
    if (stat(args[i], &sb) != 0) {
      sp_log_error("%s: cannot open: %s", args[i], strerror(errno));
      return SP_ERR_INPUT;
    }
    int rc = SP_OK;
    if (S_ISDIR(sb.st_mode)) rc = add_directory(in, args[i]);
    else if (ends_with(args[i], ".index.json")) rc = add_index(in, args[i]);
    else add_path(in, NULL, args[i]);
    if (rc != SP_OK) return rc;
  }
  return SP_OK;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static int entry_cmp(const void *a, const void *b) {
  const weight_entry *x = a, *y = b;
  int c = strcmp(x->tensor, y->tensor);
  return c ? c : strcmp(x->shard, y->shard);
}

/* Every weight_map entry must be in the shard it names, and every shard
 * tensor listed: both lists sorted and merged (a hostile index with
 * millions of entries stays O(n log n)). */
void rank_convert_check_index(const inputs *in, rank_st_file *const *f, int nf, problems *p) {
  if (in->nwm == 0) return;
  size_t nh = 0;
  for (int s = 0; s < nf; s++) nh += (size_t)f[s]->h.count;
  weight_entry *want = sp_xmalloc(((size_t)in->nwm + 1) * sizeof *want);
  weight_entry *have = sp_xmalloc((nh + 1) * sizeof *have);
  memcpy(want, in->wm, (size_t)in->nwm * sizeof *want);
  size_t k = 0;
  for (int s = 0; s < nf; s++)
    for (int t = 0; t < f[s]->h.count; t++) {
      have[k].tensor = f[s]->h.t[t].name;
      have[k].shard = (char *)base_name(f[s]->path);
      k++;
    }
  qsort(want, (size_t)in->nwm, sizeof *want, entry_cmp);
  qsort(have, nh, sizeof *have, entry_cmp);
  size_t i = 0, j = 0;
  while (i < (size_t)in->nwm || j < nh) {
    int c = i == (size_t)in->nwm ? 1 : j == nh ? -1 : entry_cmp(&want[i], &have[j]);
    if (c < 0) {
      rank_convert_problem(p, "index: tensor '%.200s' is listed in shard %s but that shard does not hold it",
              want[i].tensor, want[i].shard);
      i++;
    } else if (c > 0) {
      const char *path = have[j].shard;
      for (int s = 0; s < nf; s++)
        if (base_name(f[s]->path) == have[j].shard) path = f[s]->path;
      rank_convert_problem(p, "%s: tensor '%.200s' is not listed for this shard in the index", path,
              have[j].tensor);
      j++;
    } else {
      i++;
      j++;
    }
  }
  free(want);
  free(have);
}

int rank_convert_inputs_open(int n, char *const *args, inputs *in, rank_st_file ***f, int *nf) {
  memset(in, 0, sizeof *in);
  *f = NULL;
  *nf = 0;
  int rc = rank_convert_inputs_resolve(n, args, in);
  if (rc != SP_OK) return rc;
  *f = sp_xcalloc((size_t)in->npaths, sizeof **f);
  for (; *nf < in->npaths; (*nf)++)
    if ((rc = rank_st_open(in->paths[*nf], &(*f)[*nf])) != SP_OK) return rc;
  return SP_OK;
}

void rank_convert_inputs_close(inputs *in, rank_st_file **f, int nf) {
  for (int i = 0; i < nf; i++) rank_st_close(f[i]);
  free(f);
  rank_convert_inputs_free(in);
}

int rank_convert_inputs_any_key(int n, char *const *args, int (*is_key)(const char *),
                                int *found) {
  inputs in;
  rank_st_file **f;
  int nf;
  int rc = rank_convert_inputs_open(n, args, &in, &f, &nf), hit = 0;
  for (int s = 0; rc == SP_OK && s < nf && !hit; s++)
    for (int i = 0; i < f[s]->h.count && !hit; i++) hit = is_key(f[s]->h.t[i].name) != 0;
  rank_convert_inputs_close(&in, f, nf);
  if (rc == SP_OK) *found = hit;
  return rc;
}
