/* hub_write.c — writing a description in a layout: one .safetensors file (config files
 * beside it) or a directory of shards with model.safetensors.index.json.
 *
 * Everything is planned before a byte is written: every tensor fitted to the layout (the
 * convention's plan() gives its stored tensors or the reason it cannot), the shard of every
 * tensor, each shard's header. Then the shards are created as temporary files (a directory
 * is built in a temporary directory beside the target) and each put() writes one qtk
 * tensor's stored pieces at their offsets. Hub files are written in the order the
 * safetensors library writes them (dtype, widest first, then name), so a weight's pieces
 * land in different places of the file: positional writes make that streaming. Commit moves
 * everything into place; any failure leaves nothing behind. */
#include "hub/hub_internal.h"
#include "safetensors/st_internal.h"

#include "io/values.h"

#include <dirent.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct wshard {
    char *name;          /* file name */
    char *path;          /* where it is written (in the temporary directory, or the target file) */
    qtk__desc desc;  /* stored tensors, in file order */
    qtk__ckpt_writer *w;
    size_t bytes;
} wshard;

struct qtk__hub_writer {
    const qtk__desc *d;
    qtk_hub_layout layout;
    const hub_conv *conv;   /* NULL: qtk's convention */
    hub_wctx wc;
    hub_wtensor *wt;
    wshard *sh;
    size_t n_shards;
    size_t next;
    bool is_dir, index;
    char *out, *tmpdir, *cfg_dir; /* cfg_dir: where config files go (tmpdir or beside the file) */
    char *config_text, *hfq_text, *index_text;
    json_t *config_src;
    qtk__buf scratch;
    qtk__arena arena;
    int force;
    const volatile sig_atomic_t *cancel;
};

bool qtk__hub_out_is_dir(const char *out) {
    struct stat sb;
    if (!out || !*out) return false;
    if (stat(out, &sb) == 0) return S_ISDIR(sb.st_mode);
    size_t n = strlen(out);
    if (out[n - 1] == '/') return true;
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    return strchr(base, '.') == NULL;
}

/* ---- the order the safetensors library writes tensors in (HUB_LAYOUTS.md §1.2) ---- */

static int dtype_rank(qtk_elem e) {
    static const char *const order[] = {"BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3",
                                        "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32",
                                        "U32", "F32", "C64", "F64", "I64", "U64"};
    const char *n = qtk__st_name(e);
    for (int i = 0; n && i < (int)(sizeof order / sizeof order[0]); i++)
        if (strcmp(order[i], n) == 0) return i;
    return -1;
}

typedef struct {
    hub_wpiece *p;
} pref;

static int cmp_piece(const void *a, const void *b) {
    const hub_wpiece *x = ((const pref *)a)->p, *y = ((const pref *)b)->p;
    int rx = dtype_rank(x->elem), ry = dtype_rank(y->elem);
    if (rx != ry) return rx > ry ? -1 : 1; /* widest first */
    return strcmp(x->name, y->name);
}

/* ---- planning ---- */

static qtk_status plan_tensors(qtk__hub_writer *w) {
    const qtk__desc *d = w->d;
    for (size_t i = 0; i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        hub_wtensor *wt = &w->wt[i];
        if (!w->conv) continue; /* qtk's convention: the safetensors writer does it */
        if (!t->quantized) {
            hub_wpiece *p = hub_wpiece_add(&w->wc, wt, t, "", t->elem, t->shape, t->rank, t->nbytes);
            if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
            continue;
        }
        qtk_status st = w->conv->plan(&w->wc, t, wt);
        if (st) return qtk__err_context(st, "tensor '%s' does not fit layout %s", t->name, w->conv->name);
    }
    return QTK_OK;
}

/* Which shard each tensor goes to, and the shards' file names. */
static qtk_status plan_shards(qtk__hub_writer *w, const qtk__hub_write_opts *o) {
    const qtk__desc *d = w->d;
    const qtk__hub *src = hub_of(o->source);
    char buf[64];
    size_t n = 1;
    if (o->max_shard_bytes > 0) {
        size_t acc = 0, k = 0;
        for (size_t i = 0; i < d->n_tensors; i++) {
            if (acc > 0 && acc + d->tensors[i].nbytes > o->max_shard_bytes) k++, acc = 0;
            acc += d->tensors[i].nbytes;
            w->wt[i].shard = k;
        }
        n = k + 1;
    } else if (w->is_dir && src && src->n_shards > 1) {
        /* mirror the source: a tensor goes to the file its first piece came from */
        n = src->n_shards;
        for (size_t i = 0; i < d->n_tensors; i++) {
            size_t j = i < o->source->desc.n_tensors && strcmp(o->source->desc.tensors[i].name, d->tensors[i].name) == 0
                           ? i
                           : SIZE_MAX;
            for (size_t k = 0; j == SIZE_MAX && k < o->source->desc.n_tensors; k++)
                if (strcmp(o->source->desc.tensors[k].name, d->tensors[i].name) == 0) j = k;
            w->wt[i].shard = j == SIZE_MAX ? 0 : qtk_ckpt_shard_of(o->source, j);
        }
    }
    if (n > 1 && !w->is_dir)
        return qtk__err(QTK_E_ARG, "the output would be %zu shards: give a directory, not the file '%s'", n, w->out);
    w->sh = calloc(n, sizeof *w->sh);
    if (!w->sh) return qtk__err(QTK_E_NOMEM, "out of memory");
    w->n_shards = n;
    for (size_t k = 0; k < n; k++) {
        const char *name;
        if (!w->is_dir) {
            name = strrchr(w->out, '/') ? strrchr(w->out, '/') + 1 : w->out;
        } else if (n == 1) {
            name = "model.safetensors";
        } else if (o->max_shard_bytes > 0) {
            snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, n);
            name = buf;
        } else {
            const char *p = src->shard_path[k], *s = strrchr(p, '/');
            name = s ? s + 1 : p;
        }
        w->sh[k].name = qtk__strdup(name);
        if (!w->sh[k].name) return qtk__err(QTK_E_NOMEM, "out of memory");
        qtk__desc_init(&w->sh[k].desc);
    }
    w->index = w->is_dir && (n > 1 || (src && src->index_file));
    return QTK_OK;
}

/* Each shard's stored tensors: qtk's convention keeps the description's order (a quantized
 * tensor stays one entry the safetensors writer expands); Hub layouts are sorted as the
 * safetensors library sorts them. */
static qtk_status plan_descs(qtk__hub_writer *w) {
    const qtk__desc *d = w->d;
    qtk_status st = QTK_OK;
    for (size_t k = 0; k < w->n_shards && !st; k++) {
        wshard *s = &w->sh[k];
        for (size_t i = 0; i < d->n_meta && !st; i++) st = qtk__desc_add_meta(&s->desc, d->meta[i].key, d->meta[i].value);
        if (!w->conv) {
            s->desc.stored_as_is = d->stored_as_is;
            if (k == 0)
                for (size_t i = 0; i < d->n_scalars && !st; i++) st = qtk__desc_add_scalar(&s->desc, &d->scalars[i]);
            for (size_t i = 0; i < d->n_tensors && !st; i++) {
                const qtk_ckpt_tensor *t = &d->tensors[i];
                if (w->wt[i].shard != k) continue;
                qtk_ckpt_tensor *nt = NULL;
                st = t->quantized ? qtk__desc_add_quantized(&s->desc, t->name, &t->scheme, t->shape, t->rank, &nt)
                                  : qtk__desc_add_raw(&s->desc, t->name, t->elem, t->shape, t->rank, &nt);
                if (!st) {
                    nt->has_param_id = t->has_param_id;
                    nt->param_id = t->param_id;
                    s->bytes += t->nbytes;
                }
            }
            continue;
        }
        if (!st && d->n_meta == 0) st = qtk__desc_add_meta(&s->desc, "format", "pt"); /* what torch writers put */
        size_t np = 0;
        for (size_t i = 0; i < d->n_tensors; i++)
            if (w->wt[i].shard == k) np += w->wt[i].n;
        pref *pr = malloc((np ? np : 1) * sizeof *pr);
        if (!pr) return qtk__err(QTK_E_NOMEM, "out of memory");
        np = 0;
        for (size_t i = 0; i < d->n_tensors; i++)
            if (w->wt[i].shard == k)
                for (unsigned j = 0; j < w->wt[i].n; j++) pr[np++].p = &w->wt[i].piece[j];
        qsort(pr, np, sizeof *pr, cmp_piece);
        for (size_t j = 0; j < np && !st; j++) {
            hub_wpiece *p = pr[j].p;
            p->phys = j;
            st = qtk__desc_add_raw(&s->desc, p->name, p->elem, p->shape, p->rank, NULL);
            if (!st && s->desc.tensors[j].nbytes != p->nbytes)
                st = qtk__err(QTK_E_INTERNAL, "stored tensor '%s': %zu bytes planned, %zu by its shape", p->name, p->nbytes,
                              s->desc.tensors[j].nbytes);
            s->bytes += p->nbytes;
        }
        free(pr);
    }
    return st;
}

/* ---- config files and the index ---- */

static char *dump(const json_t *v, size_t flags) {
    char *s = json_dumps(v, flags);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return NULL;
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    return t;
}

static qtk_status plan_config(qtk__hub_writer *w, const qtk__hub_write_opts *o) {
    const qtk__hub *src = hub_of(o->source);
    bool same = src && src->layout == w->layout;
    w->wc.src_config = src ? src->config : NULL;
    w->wc.src = src;
    w->wc.src_qcfg = same && src->qcfg != src->hfq ? src->qcfg : NULL;
    w->wc.src_hfq = same ? src->hfq : NULL;
    json_t *cfg = src && src->config ? json_deep_copy(src->config) : NULL;
    if (src && src->config && !cfg) return qtk__err(QTK_E_NOMEM, "out of memory");
    if (!w->conv) {
        /* qtk's convention (or nothing quantized): the model's config without a
         * quantization_config, which would describe the source's layout */
        if (cfg && (json_object_del(cfg, "quantization_config"), json_object_size(cfg) == 0)) {
            json_decref(cfg); /* nothing but the source's quantization config: no config.json */
            cfg = NULL;
        }
        if (cfg) {
            w->config_text = dump(cfg, JSON_INDENT(2));
            json_decref(cfg);
            if (!w->config_text) return qtk__err(QTK_E_NOMEM, "out of memory");
        }
        return QTK_OK;
    }
    json_t *q = w->wc.src_qcfg ? json_deep_copy(w->wc.src_qcfg) : json_object(), *hfq = NULL;
    qtk_status st = q ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = w->conv->config(&w->wc, q, &hfq);
    if (!st && !cfg && !(cfg = json_object())) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) {
        st = hub_jset(cfg, "quantization_config", q);
        q = NULL;
    }
    if (!st && !(w->config_text = dump(cfg, JSON_INDENT(2)))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st && hfq && !(w->hfq_text = dump(hfq, JSON_INDENT(4)))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    json_decref(q);
    json_decref(hfq);
    json_decref(cfg);
    return st;
}

static qtk_status plan_index(qtk__hub_writer *w) {
    if (!w->index) return QTK_OK;
    json_t *root = json_object(), *meta = json_object(), *wm = json_object();
    qtk_status st = root && meta && wm ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    size_t total = 0;
    for (size_t k = 0; k < w->n_shards && !st; k++) {
        const qtk__desc *sd = &w->sh[k].desc;
        for (size_t i = 0; i < sd->n_tensors && !st; i++) {
            const qtk_ckpt_tensor *t = &sd->tensors[i];
            total += t->nbytes;
            if (!t->quantized) {
                st = hub_jset(wm, t->name, json_string(w->sh[k].name));
                continue;
            }
            /* qtk's convention: the tensor and its companions, as the file holds them */
            qtk_layout L;
            qpiece p[1 + QTK__ST_COMPANIONS];
            st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
            if (!st) qtk__st_quant_pieces(&t->scheme, &L, p);
            for (int j = 0; j < 1 + QTK__ST_COMPANIONS && !st; j++) {
                if (!p[j].present) continue;
                char key[1024];
                snprintf(key, sizeof key, "%s%s", t->name, p[j].suffix);
                st = hub_jset(wm, key, json_string(w->sh[k].name));
            }
        }
    }
    if (!st) st = hub_jset(meta, "total_size", json_integer((json_int_t)total));
    if (!st) {
        st = hub_jset(root, "metadata", meta);
        meta = NULL;
    }
    if (!st) {
        st = hub_jset(root, "weight_map", wm);
        wm = NULL;
    }
    if (!st && !(w->index_text = dump(root, JSON_INDENT(2) | JSON_SORT_KEYS))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    json_decref(meta);
    json_decref(wm);
    json_decref(root);
    return st;
}

/* ---- files ---- */

static bool exists(const char *dir, const char *name) {
    char *p = qtk__path_join(dir, name);
    struct stat sb;
    bool e = p && stat(p, &sb) == 0;
    free(p);
    return e;
}

/* What the new directory replaces of an old one: its checkpoint (shards, indexes) and the
 * configs that describe it. Everything else in it (a tokenizer, a README) is carried over. */
static bool checkpoint_file(const char *name) {
    return qtk__has_suffix(name, ".safetensors") || qtk__has_suffix(name, ".safetensors.index.json") ||
           strcmp(name, "config.json") == 0 || strcmp(name, "hf_quant_config.json") == 0;
}

/* A checkpoint file in dir other than self (a shard, an index), or NULL; malloc'ed. */
static char *other_checkpoint(const char *dir, const char *self) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *found = NULL;
    for (struct dirent *e; !found && (e = readdir(d));) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || strstr(nm, ".qtk-tmp-") || strstr(nm, ".qtk-old-") || strcmp(nm, self) == 0) continue;
        if (qtk__has_suffix(nm, ".safetensors") || qtk__has_suffix(nm, ".safetensors.index.json")) found = qtk__strdup(nm);
    }
    closedir(d);
    return found;
}

/* Refuses, before anything is created: config files beside a single file where other
 * checkpoints would read them too (they decide how every safetensors file of the directory
 * reads), and replacing files without force. */
static qtk_status check_targets(qtk__hub_writer *w) {
    if (!w->is_dir && (w->config_text || w->hfq_text)) {
        const char *self = strrchr(w->out, '/') ? strrchr(w->out, '/') + 1 : w->out;
        char *other = other_checkpoint(w->cfg_dir, self);
        if (other) {
            qtk_status st = qtk__err(QTK_E_ARG,
                                     "'%s': layout %s puts %s beside the file, and '%s/%s' would read it too (a "
                                     "directory's config.json describes every checkpoint in it): write to a directory of "
                                     "its own (a path without an extension, such as '%.*s/')",
                                     w->out, qtk_hub_layout_name(w->layout),
                                     w->hfq_text && w->config_text ? "config.json and hf_quant_config.json"
                                     : w->hfq_text                 ? "hf_quant_config.json"
                                                                   : "config.json",
                                     w->cfg_dir, other, (int)(strlen(self) - strlen(".safetensors")), self);
            free(other);
            return st;
        }
    }
    if (w->force) return QTK_OK;
    if (w->is_dir) {
        /* the new directory replaces the old one's checkpoint as a whole */
        DIR *d = opendir(w->out);
        char *found = NULL;
        for (struct dirent *e; d && !found && (e = readdir(d));)
            if (e->d_name[0] != '.' && !strstr(e->d_name, ".qtk-tmp-") && checkpoint_file(e->d_name))
                found = qtk__strdup(e->d_name);
        if (d) closedir(d);
        if (found) {
            qtk_status st = qtk__err(QTK_E_IO,
                                     "'%s/%s' exists; it is replaced only with force (--force), and then with the rest of "
                                     "the checkpoint in '%s'",
                                     w->out, found, w->out);
            free(found);
            return st;
        }
    }
    const char *dir = w->is_dir ? w->out : w->cfg_dir;
    const char *files[3] = {w->config_text ? "config.json" : NULL, w->hfq_text ? "hf_quant_config.json" : NULL,
                            w->index ? "model.safetensors.index.json" : NULL};
    for (int i = 0; i < 3; i++)
        if (files[i] && exists(dir, files[i]))
            return qtk__err(QTK_E_IO, "'%s/%s' exists; it is replaced only with force (--force)", dir, files[i]);
    if (w->is_dir)
        for (size_t k = 0; k < w->n_shards; k++)
            if (exists(w->out, w->sh[k].name))
                return qtk__err(QTK_E_IO, "'%s/%s' exists; it is replaced only with force (--force)", w->out, w->sh[k].name);
    return QTK_OK;
}

/* A fresh directory beside the target. Not mkdtemp: its 0700 mode would become the output
 * directory's; mkdir with 0777 lets the umask decide, as for any new directory. */
static qtk_status make_tmpdir(qtk__hub_writer *w) {
    size_t n = strlen(w->out);
    while (n > 1 && w->out[n - 1] == '/') n--;
    char *t = malloc(n + 48);
    if (!t) return qtk__err(QTK_E_NOMEM, "out of memory");
    static atomic_ulong counter; /* distinct names for writers in several threads */
    for (int tries = 0; tries < 100; tries++) {
        snprintf(t, n + 48, "%.*s.qtk-tmp-%ld-%lu", (int)n, w->out, (long)getpid(), atomic_fetch_add(&counter, 1));
        if (mkdir(t, 0777) == 0) {
            w->tmpdir = t;
            qtk__temp_dir_track(t);
            return QTK_OK;
        }
        if (errno != EEXIST) break;
    }
    int e = errno;
    free(t);
    return qtk__err(QTK_E_IO, "cannot create a directory beside '%s': %s", w->out, strerror(e));
}

static void remove_tmpdir(qtk__hub_writer *w) {
    if (!w->tmpdir) return;
    DIR *d = opendir(w->tmpdir);
    if (d) {
        for (struct dirent *e; (e = readdir(d));) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char *p = qtk__path_join(w->tmpdir, e->d_name);
            if (p) unlink(p);
            free(p);
        }
        closedir(d);
    }
    qtk__temp_dir_untrack(w->tmpdir);
    rmdir(w->tmpdir);
    free(w->tmpdir);
    w->tmpdir = NULL;
}

static qtk_status open_files(qtk__hub_writer *w) {
    qtk_status st = QTK_OK;
    if (w->is_dir) st = make_tmpdir(w);
    for (size_t k = 0; k < w->n_shards && !st; k++) {
        wshard *s = &w->sh[k];
        s->path = w->is_dir ? qtk__path_join(w->tmpdir, s->name) : qtk__strdup(w->out);
        if (!s->path) return qtk__err(QTK_E_NOMEM, "out of memory");
        st = qtk__ckpt_writer_open_ops(s->path, &qtk__safetensors_ops, &s->desc, w->is_dir ? 0 : w->force, &s->w);
        qtk__ckpt_writer_set_cancel(s->w, w->cancel);
    }
    return st;
}

/* A config file or the index as a temporary beside its target, for qtk__commit_files. */
static qtk_status open_text(const char *dir, const char *name, const char *text, int force, qtk__afile *a) {
    char *p = qtk__path_join(dir, name);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__afile_open(a, p, force);
    free(p);
    if (!st) st = qtk__afile_write(a, text, strlen(text));
    if (!st) st = qtk__afile_finish(a);
    return st;
}


/* ---- the writer ---- */

static void writer_free(qtk__hub_writer *w) {
    for (size_t k = 0; k < w->n_shards; k++) {
        qtk__ckpt_writer_abort(w->sh[k].w);
        qtk__desc_free(&w->sh[k].desc);
        free(w->sh[k].name);
        free(w->sh[k].path);
    }
    remove_tmpdir(w);
    free(w->sh);
    free(w->wt);
    free(w->out);
    free(w->cfg_dir);
    free(w->config_text);
    free(w->hfq_text);
    free(w->index_text);
    qtk__buf_free(&w->scratch);
    qtk__arena_free(&w->arena);
    free(w);
}

void qtk__hub_writer_abort(qtk__hub_writer *w) {
    if (w) writer_free(w);
}

size_t qtk__hub_writer_shards(const qtk__hub_writer *w) { return w ? w->n_shards : 0; }

bool qtk__hub_can_hold(qtk_hub_layout layout, const qtk_ckpt_tensor *t, char *why, size_t cap) {
    const hub_conv *conv = hub_conv_of(layout);
    if (!conv || !t->quantized) return true; /* qtk's convention holds every scheme; raw tensors pass */
    qtk__desc d;
    qtk__desc_init(&d);
    hub_wtensor wt;
    memset(&wt, 0, sizeof wt);
    qtk__arena arena = {0};
    hub_wctx wc = {.d = &d, .wt = &wt, .layout = layout, .arena = &arena};
    qtk_ckpt_tensor *c = NULL;
    qtk_status st = qtk__desc_add_copy(&d, t, &c);
    if (!st) st = conv->plan(&wc, c, &wt);
    if (st && why && cap) snprintf(why, cap, "%s", qtk_last_error());
    qtk__arena_free(&arena);
    qtk__desc_free(&d);
    return st == QTK_OK;
}

qtk_status qtk__hub_writer_open(const char *out, const qtk__desc *d, const qtk__hub_write_opts *o,
                               qtk__hub_writer **wout) {
    if (!out || !d || !o || !wout) return qtk__err(QTK_E_ARG, "qtk__hub_writer_open: NULL argument");
    *wout = NULL;
    qtk_hub_layout l = o->layout == QTK_LAYOUT_AUTO ? QTK_LAYOUT_QTK : o->layout;
    if ((unsigned)l >= QTK_LAYOUT_COUNT_ || l == QTK_LAYOUT_NONE)
        return qtk__err(QTK_E_ARG, "cannot write layout '%s'", qtk_hub_layout_name(l));
    qtk__hub_writer *w = calloc(1, sizeof *w);
    if (!w) return qtk__err(QTK_E_NOMEM, "out of memory");
    w->d = d;
    w->layout = l;
    w->conv = hub_conv_of(l);
    w->force = o->force;
    w->cancel = o->cancel;
    w->is_dir = qtk__hub_out_is_dir(out);
    w->out = qtk__strdup(out);
    w->wt = calloc(d->n_tensors ? d->n_tensors : 1, sizeof *w->wt);
    w->wc = (hub_wctx){.d = d, .wt = w->wt, .layout = l, .arena = &w->arena, .notice = o->notice, .ctx = o->ctx};
    qtk_status st = w->out && w->wt ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st && !w->is_dir && !qtk__has_suffix(out, ".safetensors"))
        st = qtk__err(QTK_E_ARG, "'%s': write layouts to a .safetensors file or a directory", out);
    if (!st && !w->is_dir && !(w->cfg_dir = qtk__path_dir(out))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = plan_tensors(w);
    if (!st) st = plan_shards(w, o);
    if (!st) st = plan_descs(w);
    if (!st) st = plan_config(w, o);
    if (!st) st = plan_index(w);
    if (!st) st = check_targets(w);
    if (!st) st = open_files(w);
    if (st) {
        writer_free(w);
        return st;
    }
    *wout = w;
    return QTK_OK;
}

qtk_status qtk__hub_writer_put(qtk__hub_writer *w, const void *bytes, size_t len) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk__hub_writer_put: writer is NULL");
    if (w->next >= w->d->n_tensors) return qtk__err(QTK_E_ARG, "all %zu tensors are written already", w->d->n_tensors);
    const qtk_ckpt_tensor *t = &w->d->tensors[w->next];
    if (len != t->nbytes) return qtk__err(QTK_E_LENGTH, "tensor '%s' takes %zu bytes; got %zu", t->name, t->nbytes, len);
    if (!bytes && len) return qtk__err(QTK_E_ARG, "tensor '%s': bytes are NULL", t->name);
    wshard *s = &w->sh[w->wt[w->next].shard];
    qtk_status st = QTK_OK;
    if (!w->conv) {
        st = qtk__ckpt_writer_put(s->w, bytes, len);
    } else {
        if (t->quantized && (st = qtk_bytes_check(bytes, len, t->shape, t->rank, &t->scheme)))
            return qtk__err_context(st, "tensor '%s'", t->name);
        const hub_wtensor *wt = &w->wt[w->next];
        for (unsigned j = 0; j < wt->n && !st; j++) {
            const hub_wpiece *p = &wt->piece[j];
            const uint8_t *src = (const uint8_t *)bytes + p->src_off;
            if (p->constant) src = p->constant;
            else if (p->encode) {
                st = qtk__buf_reserve(&w->scratch, p->nbytes);
                if (!st) st = p->encode(&w->wc, p, t, bytes, w->scratch.p);
                src = w->scratch.p;
            }
            if (!st) st = qtk__ckpt_writer_put_at(s->w, p->phys, src, p->nbytes);
        }
        if (st) qtk__err_context(st, "tensor '%s'", t->name);
    }
    if (!st) w->next++;
    return st;
}

qtk_status qtk__hub_writer_commit(qtk__hub_writer *w) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk__hub_writer_commit: writer is NULL");
    qtk_status st = QTK_OK;
    if (w->next != w->d->n_tensors) st = qtk__err(QTK_E_ARG, "only %zu of %zu tensors were written", w->next, w->d->n_tensors);
    /* every file complete and synced as a temporary first: shards, index, configs */
    qtk__afile *files = calloc(w->n_shards + 3, sizeof *files);
    size_t nf = 0;
    if (!st && !files) st = qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t k = 0; k < w->n_shards && !st; k++) {
        st = qtk__ckpt_writer_finish(w->sh[k].w, &files[nf]);
        w->sh[k].w = NULL;
        if (!st) nf++;
    }
    const char *dir = w->is_dir ? w->tmpdir : w->cfg_dir;
    int force = w->is_dir ? 0 : w->force;
    const char *names[3] = {"model.safetensors.index.json", "hf_quant_config.json", "config.json"};
    const char *texts[3] = {w->index ? w->index_text : NULL, w->hfq_text, w->config_text};
    for (int i = 0; i < 3 && !st; i++) {
        if (!texts[i]) continue;
        st = open_text(dir, names[i], texts[i], force, &files[nf]);
        nf++;
    }
    if (st) {
        for (size_t i = 0; i < nf; i++) qtk__afile_abort(&files[i]);
    } else {
        /* then moved into place together: the files of one output, or the directory */
        sigset_t mask;
        qtk__signals_hold(&mask);
        st = qtk__commit_files(files, nf, w->cancel);
        if (!st && w->is_dir) {
            size_t n = strlen(w->out);
            char *target = qtk__strdup(w->out);
            if (!target) st = qtk__err(QTK_E_NOMEM, "out of memory");
            while (target && n > 1 && target[n - 1] == '/') target[--n] = '\0';
            if (!st) st = qtk__dir_replace(w->tmpdir, target, checkpoint_file, w->cancel);
            struct stat sb;
            if (!st && stat(w->tmpdir, &sb) != 0) { /* gone: the directory is in place */
                free(w->tmpdir);
                w->tmpdir = NULL;
            }
            free(target);
        }
        qtk__signals_release(&mask);
    }
    free(files);
    writer_free(w);
    return st;
}

qtk_status qtk__hub_write(const char *out, const qtk__desc *d, const void *const *bytes, const qtk__hub_write_opts *o) {
    qtk__hub_writer *w = NULL;
    qtk_status st = qtk__hub_writer_open(out, d, o, &w);
    for (size_t i = 0; !st && i < d->n_tensors; i++) st = qtk__hub_writer_put(w, bytes[i], d->tensors[i].nbytes);
    if (st) {
        qtk__hub_writer_abort(w);
        return st;
    }
    return qtk__hub_writer_commit(w);
}
