//! The committed bindings cannot drift from the C headers: a C probe, compiled against the
//! same headers as the library, prints every mirrored struct's size, alignment and field
//! offsets and every constant's value; the Rust side must agree on each. The list of structs
//! and fields below is checked against src/sys.rs itself, so a field bindgen adds is caught
//! too (update the list from the message).
use qtk::sys;
use std::collections::BTreeMap;
use std::process::Command;

macro_rules! layouts {
    ($($s:ident { $($f:ident),* })*) => {{
        let mut v: Vec<(String, usize)> = Vec::new();
        $(
            v.push((format!("sizeof {}", stringify!($s)), std::mem::size_of::<sys::$s>()));
            v.push((format!("alignof {}", stringify!($s)), std::mem::align_of::<sys::$s>()));
            $({
                let u = std::mem::MaybeUninit::<sys::$s>::uninit();
                let base = u.as_ptr();
                // SAFETY: addr_of! takes the field's address without reading it.
                let off = unsafe { std::ptr::addr_of!((*base).$f) as usize - base as usize };
                v.push((format!("offsetof {} {}", stringify!($s), stringify!($f)), off));
            })*
        )*
        v
    }};
}

fn rust_layouts() -> Vec<(String, usize)> {
    layouts! {
        qtk_allocator { alloc, free, opaque }
        qtk_scheme { value, mode, store, pack_dim, block_rank, block, block_dtype, tensor_dtype, table, offset, offset_dtype, super_block, super_dtype }
        qtk_layout { rank, shape, numel, bits, fields_per_unit, unit_bytes, pack_axis, storage_shape, value_bytes, block, grid, n_scales, scale_dtype, scale_bytes, global_bytes, table_entries, table_bytes, scales_offset, global_offset, table_offset, total_bytes, offset_dtype, offset_bytes, offsets_offset }
        qtk_quantize_options { calibration, scales, n_scales, global, threads, weights, n_weights, offsets, n_offsets }
        qtk_matmul_options { layout, precision, threads }
        qtk_ckpt_tensor { name, quantized, elem, scheme, rank, shape, numel, nbytes, has_param_id, param_id, file_type, file_bytes, decoded, value_shape, value_rank }
        qtk_open_options { layout }
        qtk_ckpt_scalar { name, kind, i, u, f, b }
        qtk_ckpt_facts { file_bytes, header_bytes, data_start, note }
        qtk_hub_notice { tensor, text }
        qtk_hub_info { layout, detected_by, config_file, quant_config, index_file, n_shards, shards, n_notices, notices }
        qtk_ckpt_view { data, len, owned, index }
        qtk_write_options { format, layout, max_shard_bytes, source, force, notice, ctx, cancel }
        qtk_progress { done, total, bytes_done, bytes_total }
        qtk_convert_event { kind, in_, out, action, reason, rule, why, sqnr_db, tensor, text }
        qtk_convert_options { scheme, rules, n_rules, only, skip, min_elements, dtype, cast_floats, calibration, input_layout, format, layout, max_shard_bytes, force, threads, progress, event, ctx, cancel, imatrix, mixture }
        qtk_convert_summary { tensors, quantized, dequantized, cast, kept, in_bytes, out_bytes, in_format, out_format, in_layout, out_layout, in_files, out_files, out_directory }
        qtk_eval_options { schemes, n_schemes, calibrations, n_calibrations, only, skip, min_elements, input_layout, threads, progress, ctx, cancel, imatrix }
        qtk_eval_cell { ok, bytes, numel, sum_sq_err, sum_sq_sig, max_abs, weighted, sum_w_sq_err, sum_w_sq_sig, err }
        qtk_eval_row { name, stored, rank, shape, numel, weighted }
        qtk_eval_column { spec, scheme, calibration }
        qtk_eval_metrics { bits_per_el, rmse, max_abs, sqnr_db, wsqnr_db }
        qtk_imatrix_entry { name, weights, columns, experts }
    }
}

const SYS: &str = include_str!("../src/sys.rs");

/// (struct, [fields]) as src/sys.rs declares them (opaque handles have none).
fn sys_structs() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for line in SYS.lines() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            cur = Some((rest.trim_end_matches(" {").to_string(), Vec::new()));
        } else if line == "}" {
            if let Some(c) = cur.take() {
                if !c.1.is_empty() {
                    out.push(c);
                }
            }
        } else if let Some((_, f)) = cur.as_mut() {
            if let Some(rest) = line.trim_start().strip_prefix("pub ") {
                if let Some(name) = rest.split(':').next() {
                    f.push(name.to_string());
                }
            }
        }
    }
    out
}

/// (rust name, C expression, value) of every integer constant in src/sys.rs.
fn sys_consts() -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    for line in SYS.lines() {
        let rest = match line.strip_prefix("pub const ") {
            Some(r) => r,
            None => continue,
        };
        let (name, rest) = rest.split_once(": ").unwrap();
        let (ty, value) = rest.split_once(" = ").unwrap();
        let value: i64 = value.trim_end_matches(';').parse().unwrap();
        let cname = match name.strip_prefix(&format!("{}_", ty)) {
            Some(c) if ty.starts_with("qtk_") => c.to_string(),
            _ => name.to_string(),
        };
        out.push((name.to_string(), cname, value));
    }
    out
}

#[test]
fn the_field_list_is_complete() {
    let listed: BTreeMap<String, usize> = rust_layouts().into_iter().collect();
    for (s, fields) in sys_structs() {
        assert!(listed.contains_key(&format!("sizeof {}", s)), "tests/abi.rs does not list struct {}: add `{} {{ {} }}`", s, s, fields.join(", "));
        for f in &fields {
            assert!(listed.contains_key(&format!("offsetof {} {}", s, f)), "tests/abi.rs does not list {}.{}", s, f);
        }
    }
    assert!(sys_consts().len() > 140, "{} constants", sys_consts().len());
}

#[test]
fn c_and_rust_agree_on_every_layout_and_constant() {
    let dirs = match option_env!("QTK_SYS_INCLUDE_DIRS").filter(|d| !d.is_empty()) {
        Some(d) => d,
        None => {
            eprintln!("skipped: the build did not say where qtk's headers are (set QTK_INCLUDE_DIR with QTK_LIB_DIR)");
            return;
        }
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include \"qtk.h\"\n#include \"qtk_matmul.h\"\n#include \"qtk_ckpt.h\"\nint main(void) {\n");
    for (s, fields) in sys_structs() {
        c += &format!("    printf(\"sizeof {0} %zu\\n\", sizeof({0}));\n    printf(\"alignof {0} %zu\\n\", _Alignof({0}));\n", s);
        for f in fields {
            let cf = if f == "in_" { "in".to_string() } else { f.clone() };
            c += &format!("    printf(\"offsetof {} {} %zu\\n\", offsetof({}, {}));\n", s, f, s, cf);
        }
    }
    for (name, cname, _) in sys_consts() {
        c += &format!("    printf(\"const {} %lld\\n\", (long long)({}));\n", name, cname);
    }
    c += "    return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("qtk-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("probe.c"), c).unwrap();
    let mut cmd = Command::new(&cc);
    cmd.arg("-std=c11").arg("-o").arg(dir.join("probe")).arg(dir.join("probe.c"));
    for d in dirs.split(':') {
        cmd.arg(format!("-I{}", d));
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: no C compiler ({}: {})", cc, e);
            return;
        }
    };
    assert!(out.status.success(), "the probe does not compile: {}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(dir.join("probe")).output().unwrap();
    let text = String::from_utf8(run.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let c_side: BTreeMap<String, i64> = text
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let mut checked = 0;
    for (k, v) in rust_layouts() {
        assert_eq!(c_side.get(&k).copied(), Some(v as i64), "{}: C and Rust differ", k);
        checked += 1;
    }
    for (name, _, v) in sys_consts() {
        assert_eq!(c_side.get(&format!("const {}", name)).copied(), Some(v), "constant {}: C and Rust differ", name);
        checked += 1;
    }
    assert!(checked > 350, "{} checks", checked);
}
