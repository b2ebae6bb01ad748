/* ckpt_list.c — one line per tensor of a checkpoint: name, dtype or scheme, shape.
 *
 *     ckpt_list model.safetensors        (or .bpk, .gguf, an index, a directory of shards)
 *
 * On a file that is not a checkpoint it prints qtk's message and exits with status 1. */
#include <qtk_ckpt.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CHECKPOINT\n", argv[0]);
        return 2;
    }
    qtk_ckpt *c = NULL;
    if (qtk_ckpt_open(argv[1], NULL, &c) != QTK_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], qtk_last_error());
        return 1;
    }
    for (size_t i = 0; i < qtk_ckpt_count(c); i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        char type[256], shape[256];
        printf("%s\t%s\t%s\n", t->name, qtk_ckpt_type_string(t, type, sizeof type),
               qtk_shape_format(t->shape, t->rank, shape, sizeof shape));
    }
    qtk_ckpt_close(c);
    return 0;
}
