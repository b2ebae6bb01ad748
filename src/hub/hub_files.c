/* hub_files.c — which files make a checkpoint (a .safetensors file, an index and the shards
 * its weight_map names, a directory), and the configs beside them (config.json,
 * hf_quant_config.json, GPTQ's quantize_config.json, AWQ's quant_config.json). hub_build (hub.c) makes the logical checkpoint over them. */
#include "hub/hub_internal.h"
#include "safetensors/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- configs beside the files ---- */

static qtk_status read_json(const char *dir, const char *name, json_t **out, char **path_out) {
    *out = NULL;
    char *p = qtk__path_join(dir, name);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    struct stat sb;
    if (stat(p, &sb) != 0) {
        free(p);
        return QTK_OK; /* absent: fine */
    }
    json_error_t e;
    *out = json_load_file(p, JSON_REJECT_DUPLICATES, &e);
    if (!*out || !json_is_object(*out)) {
        qtk_status st = qtk__err(QTK_E_FORMAT, "'%s' is not a JSON object%s%s (line %d)", p, *out ? "" : ": ",
                                 *out ? "" : e.text, e.line);
        json_decref(*out);
        *out = NULL;
        free(p);
        return st;
    }
    if (path_out) *path_out = p;
    else free(p);
    return QTK_OK;
}

static const char *dump_compact(qtk__hub *h, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    const char *r = s ? qtk__arena_strdup(&h->arena, s) : NULL;
    free(s);
    return r;
}

qtk_status hub_read_configs(qtk__hub *h, const char *dir) {
    if (!dir) return QTK_OK;
    char *cp = NULL, *hp = NULL;
    qtk_status st = read_json(dir, "config.json", &h->config, &cp);
    if (!st) st = read_json(dir, "hf_quant_config.json", &h->hfq, &hp);
    if (!st && h->config) {
        const json_t *q = hub_json(h->config, "quantization_config");
        if (q && !json_is_object(q)) st = qtk__err(QTK_E_FORMAT, "'%s': quantization_config is not an object", cp);
        else if (q) {
            h->qcfg = q;
            h->config_file = qtk__arena_strdup(&h->arena, cp);
        }
    }
    if (!st && !h->qcfg && h->hfq) {
        const json_t *q = hub_json(h->hfq, "quantization");
        if (json_is_object(q)) {
            h->qcfg = h->hfq;
            h->config_file = qtk__arena_strdup(&h->arena, hp);
        }
    }
    /* older GPTQ / AWQ repositories: the config in a file of its own */
    static const char *const own[] = {"quantize_config.json", "quant_config.json"};
    for (int i = 0; i < 2 && !st && !h->qcfg; i++) {
        char *fp = NULL;
        st = read_json(dir, own[i], &h->qfile, &fp);
        if (!st && h->qfile) {
            h->qcfg = h->qfile;
            h->config_file = qtk__arena_strdup(&h->arena, fp);
        }
        free(fp);
    }
    if (!st && h->qcfg) h->quant_json = dump_compact(h, h->qcfg);
    free(cp);
    free(hp);
    return st;
}

qtk_status qtk__hub_open_file(qtk_ckpt *c, const char *path, qtk_hub_layout layout, qtk_ckpt **out) {
    *out = NULL;
    qtk_ckpt **shards = malloc(sizeof *shards);
    char **paths = malloc(sizeof *paths);
    char *p = qtk__strdup(c->name), *dir = path ? qtk__path_dir(path) : NULL;
    if (!shards || !paths || !p || (path && !dir)) {
        free(shards), free(paths), free(p), free(dir);
        qtk_ckpt_close(c);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    shards[0] = c;
    paths[0] = p;
    /* on failure build closes the shard */
    qtk_status st = hub_build(shards, paths, 1, dir, NULL, NULL, layout, path ? path : p, out);
    free(dir);
    return st;
}

/* ---- which files ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Opens the listed files (the caller keeps paths). */
static qtk_status open_shards(char **paths, size_t n, qtk_ckpt ***out) {
    qtk_ckpt **s = calloc(n ? n : 1, sizeof *s);
    if (!s) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < n && !st; i++) {
        static const qtk__ckpt_ops *const st_only[] = {&qtk__safetensors_ops};
        st = qtk__ckpt_open_path(paths[i], st_only, 1, &s[i]);
    }
    if (st) {
        for (size_t i = 0; i < n; i++) qtk_ckpt_close(s[i]);
        free(s);
        return st;
    }
    *out = s;
    return QTK_OK;
}

static void free_paths(char **p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
    free(p);
}

/* An index: its weight_map names the shards (in file-name order). */
qtk_status qtk__hub_open_index(const char *index, qtk_hub_layout layout, qtk_ckpt **out) {
    json_error_t e;
    json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &e);
    if (!root) return qtk__err(QTK_E_FORMAT, "'%s': %s (line %d)", index, e.text, e.line);
    const json_t *wm = hub_json(root, "weight_map");
    qtk_status st = QTK_OK;
    if (!json_is_object(wm)) st = qtk__err(QTK_E_FORMAT, "'%s' has no \"weight_map\" object", index);
    size_t n = 0, cap = json_object_size(wm);
    char **names = calloc(cap ? cap : 1, sizeof *names);
    if (!st && !names) st = qtk__err(QTK_E_NOMEM, "out of memory");
    for (void *it = st ? NULL : json_object_iter((json_t *)(uintptr_t)wm); it && !st;
         it = json_object_iter_next((json_t *)(uintptr_t)wm, it)) {
        const json_t *v = json_object_iter_value(it);
        const char *f = json_string_value(v);
        if (!f || !*f || strchr(f, '/') || strcmp(f, "..") == 0 || strcmp(f, ".") == 0) {
            st = qtk__err(QTK_E_FORMAT, "'%s': weight_map[\"%s\"] is not a file name in the index's directory", index,
                          json_object_iter_key(it));
            break;
        }
        bool seen = false;
        for (size_t i = 0; i < n && !seen; i++) seen = strcmp(names[i], f) == 0;
        if (!seen && !(names[n++] = strdup(f))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    }
    if (!st && n == 0) st = qtk__err(QTK_E_FORMAT, "'%s': the weight_map is empty", index);
    char *dir = st ? NULL : qtk__path_dir(index);
    if (!st && !dir) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) {
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n && !st; i++) {
            char *p = qtk__path_join(dir, names[i]);
            if (!p) st = qtk__err(QTK_E_NOMEM, "out of memory");
            free(names[i]);
            names[i] = p;
        }
    }
    qtk_ckpt **shards = NULL;
    if (!st) st = open_shards(names, n, &shards);
    if (!st) {
        st = hub_build(shards, names, n, dir, index, wm, layout, index, out);
        names = NULL; /* owned by build */
    }
    if (st && names) free_paths(names, n);
    free(dir);
    json_decref(root);
    return st;
}

/* A directory: its index if it has one, else its .safetensors files. */
qtk_status qtk__hub_open_dir(const char *path, qtk_hub_layout layout, qtk_ckpt **out) {
    DIR *d = opendir(path);
    if (!d) return qtk__err(QTK_E_IO, "cannot open directory '%s': %s", path, strerror(errno));
    char **files = NULL, *index = NULL;
    size_t n = 0, cap = 0;
    int n_index = 0;
    qtk_status st = QTK_OK;
    for (struct dirent *e; (e = readdir(d)) && !st;) {
        const char *nm = e->d_name;
        if (nm[0] == '.') continue;
        if (qtk__has_suffix(nm, ".safetensors.index.json")) {
            /* model.safetensors.index.json is the one loaders look for first */
            if (!index || strcmp(nm, "model.safetensors.index.json") == 0) {
                free(index);
                if (!(index = qtk__path_join(path, nm))) st = qtk__err(QTK_E_NOMEM, "out of memory");
            }
            n_index++;
        } else if (qtk__has_suffix(nm, ".safetensors") && strstr(nm, ".qtk-tmp-") == NULL) {
            if (!qtk__grow((void **)&files, &cap, n, sizeof *files) || !(files[n++] = qtk__path_join(path, nm)))
                st = qtk__err(QTK_E_NOMEM, "out of memory");
        }
    }
    closedir(d);
    if (!st && n_index > 1 && !qtk__has_suffix(index, "/model.safetensors.index.json"))
        st = qtk__err(QTK_E_FORMAT, "directory '%s' holds %d indexes (*.safetensors.index.json): open one of them", path, n_index);
    if (!st && index) {
        free_paths(files, n);
        st = qtk__hub_open_index(index, layout, out);
        free(index);
        return st;
    }
    free(index);
    if (!st && n == 0) st = qtk__err(QTK_E_NOTFOUND, "directory '%s' holds no .safetensors file and no index", path);
    if (st) {
        free_paths(files, n);
        return st;
    }
    qsort(files, n, sizeof *files, cmp_str);
    qtk_ckpt **shards = NULL;
    st = open_shards(files, n, &shards);
    if (st) {
        free_paths(files, n);
        return st;
    }
    return hub_build(shards, files, n, path, NULL, NULL, layout, path, out);
}
