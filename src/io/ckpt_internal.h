/* ckpt_internal.h — what a checkpoint format implements, and the reader/writer state the
 * formats share. A new format is one file defining a qtk__ckpt_ops and one line in the
 * table of checkpoint.c. */
#ifndef QTK_CKPT_INTERNAL_H
#define QTK_CKPT_INTERNAL_H

#include "io/checkpoint.h"
#include "io/fileio.h"
#include "io/mapfile.h"

#include "common/internal.h"

/* Where a tensor's bytes are: one or more ranges of the file, concatenated in order (a
 * quantized tensor of the safetensors convention is values + scales + global + table). */
#define QTK__MAX_PIECES 4
typedef struct qtk__ckpt_piece {
    size_t off, len; /* absolute file offset */
} qtk__ckpt_piece;
typedef struct qtk__ckpt_loc {
    qtk__ckpt_piece piece[QTK__MAX_PIECES];
    unsigned n;
} qtk__ckpt_loc;

/* A logical checkpoint built over other open checkpoints (hub.c: Hugging Face layouts and
 * sharded checkpoints) hands its tensors out itself: when virt is set, map and loc are
 * unused and these replace them. */
typedef struct qtk__ckpt_virt {
    /* On failure load leaves nothing to release (v->owned NULL). */
    qtk_status (*load)(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
    /* Gives v->owned back (optional: NULL means free()). */
    void (*release)(qtk_ckpt *c, qtk_ckpt_view *v);
    void (*drop_pages)(qtk_ckpt *c, size_t i);
    size_t (*offset_of)(const qtk_ckpt *c, size_t i);
    void (*close)(void *impl);
} qtk__ckpt_virt;

struct qtk_ckpt {
    qtk_ckpt_format fmt;
    char *name;           /* path, for messages */
    qtk__mapfile map;
    qtk__desc desc;
    qtk__ckpt_loc *loc;   /* parallel to desc.tensors */
    size_t cap_loc;
    qtk_ckpt_facts facts;
    void *priv;           /* the format's own reader state (ops->close frees it) */
    const qtk__ckpt_virt *virt; /* a logical checkpoint's own loader (hub.c), else NULL */
    void *impl;           /* its state (virt->close frees it) */
};

struct qtk__ckpt_writer {
    qtk__afile file;
    const struct qtk__ckpt_ops *ops;
    const qtk__desc *desc;
    size_t next;          /* tensors written so far */
    size_t pos;           /* bytes written into the data section */
    size_t *offsets;      /* per tensor: start relative to the data section (set by begin) */
    size_t data_end;      /* relative end of the last tensor */
    void *priv;           /* the format's own writer state (ops->wfree frees it) */
    size_t data_start;    /* absolute start of the data section (set after begin) */
    uint8_t *put_done;    /* qtk__ckpt_writer_put_at: which tensors are written (else NULL) */
};

typedef struct qtk__ckpt_ops {
    qtk_ckpt_format fmt;
    const char *name;
    /* true if the bytes look like this format (a magic number, a header shape) */
    bool (*sniff)(const uint8_t *data, size_t len);
    /* Validates c->map and fills c->desc, c->loc (one per tensor, in file order), c->facts. */
    qtk_status (*parse)(qtk_ckpt *c);
    /* Validates w->desc for the format, sets w->offsets/data_end, and writes everything
     * before the tensor data. */
    qtk_status (*begin)(qtk__ckpt_writer *w);
    /* Optional: writes tensor w->next (NULL: zero-fill up to its offset, then the bytes as
     * they are — right for formats that store Burn's layout). */
    qtk_status (*put)(qtk__ckpt_writer *w, const uint8_t *bytes, size_t len);
    /* Optional: produces tensor i's bytes (a format whose tensors are not stored in the
     * description's layout and must be translated on load, GGUF); sets v->data and, for a
     * buffer it allocated, v->owned (freed by qtk_ckpt_unload). NULL: the bytes are the
     * file's pieces (c->loc). */
    qtk_status (*load)(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
    /* Optional: frees c->priv / w->priv. */
    void (*close)(qtk_ckpt *c);
    void (*wfree)(qtk__ckpt_writer *w);
} qtk__ckpt_ops;

extern const qtk__ckpt_ops qtk__burnpack_ops;
extern const qtk__ckpt_ops qtk__safetensors_ops;
extern const qtk__ckpt_ops qtk__gguf_ops;

/* Opens one file as it is (qtk_ckpt_open adds Hub layouts and shards on top, hub.c). */
qtk_status qtk__ckpt_open_file(const char *path, qtk_ckpt **out);
/* A fresh, empty checkpoint object named name (for logical checkpoints). */
qtk_status qtk__ckpt_new(const char *name, qtk_ckpt **out);
/* hub.c: c, just opened from a safetensors file in directory dir (NULL for a buffer), is
 * replaced by a logical checkpoint when its tensors follow a Hub layout. */
qtk_status qtk__hub_wrap(qtk_ckpt **c, const char *dir);
/* Writes tensor j of the writer's description at its place, in any order (formats without
 * a put hook); commit still checks that every tensor was written once. */
qtk_status qtk__ckpt_writer_put_at(qtk__ckpt_writer *w, size_t j, const void *bytes, size_t len);

/* Appends a location for the tensor just added to c->desc. */
qtk_status qtk__ckpt_add_loc(qtk_ckpt *c, const qtk__ckpt_loc *loc);

/* Lookup-mode tensors carry their table's entries after the scales (SPEC §5), but neither
 * Burn's scheme nor a file has to name a table qtk knows. This names the table the entries
 * are: `hint` if that table has exactly these entries, else a built-in one that does, else
 * `hint` registered with them if no table has that name yet, else a table registered under
 * a name derived from the entries ("lut-" + 16 hex digits). */
qtk_status qtk__ckpt_resolve_table(qtk_scheme *s, const uint8_t *entries, size_t n, const char *hint);

/* true if s[0..n) is valid UTF-8 without NUL bytes. */
bool qtk__utf8_ok(const char *s, size_t n);


#define QTK__ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

#endif
