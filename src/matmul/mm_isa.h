/* mm_isa.h — the kernel table of one level, included last by mm_portable.c, mm_avx2.c and
 * mm_avx512.c. */
#ifndef MV_GB_INSN
#  define MV_GB_INSN "lane loops"
#endif
const qtk__mm_isa MV_TABLE = {
    .name = MV_NAME,
    .generic_name = MV_NAME " generic: tiles decoded by the element codecs, f32 microkernel",
    .fused_name = MV_NAME " exact: fused GEMV, weights decoded in registers",
    .tiled_name = MV_NAME " exact: tiled GEMM, tiles decoded into L1, f32 microkernel",
    .int_name = int_name,
    .gb_int_name = MV_NAME " integer: ggml's blocks, " MV_GB_INSN,
#ifdef GB_LAT_INSN
    .gb_lat_int_name = MV_NAME " integer: lattice blocks, " GB_LAT_INSN,
    .gb_lat_int = GB_LAT_INT,
    .gb_lat_exact = GB_LAT_EXACT,
    .gb_lat_exact_name = MV_NAME " exact: lattice blocks decoded to f32 per block, f32 FMA in 4 accumulators",
#else
    .gb_lat_int_name = "scalar integer: lattice blocks unpacked, int32 sums per block, in order of k",
    .gb_lat_int = qtk__mm_gb_ref_range,
#endif
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
