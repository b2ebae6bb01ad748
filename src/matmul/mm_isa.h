/* mm_isa.h — the kernel table of one level, included last by mm_portable.c, mm_avx2.c and
 * mm_avx512.c. */
const qtk__mm_isa MV_TABLE = {
    .name = MV_NAME,
    .lanes = MV_L,
    .ir = IR,
    .jr = MV_JV * MV_L,
    .fused_max_m = 8,
#ifdef MV_INT_MAX_M
    .int_max_m = MV_INT_MAX_M,
#else
    .int_max_m = {QTK__MM_INT_MAX_M, QTK__MM_INT_MAX_M, QTK__MM_INT_MAX_M},
#endif
    .nk_fused = nk_fused,
    .kn_fused = kn_fused,
    .decode = decode,
    .ukr = ukr,
    .int_prepare = int_prepare,
    .nk_int = nk_int,
    .gb_int = GB_INT,
    .gb_int_max_m = SIZE_MAX,
    .step = mm_step,
    .order = mm_order,
    .stream_mode = mm_stream_mode,
    .row_ws = mm_row_ws,
};
