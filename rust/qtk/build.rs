//! Finds libqtk_ckpt and libqtk without any crate, in this order:
//!
//! 1. `QTK_LIB_DIR`: a directory holding libqtk_ckpt.a and libqtk.a (or the .so files);
//!    `QTK_INCLUDE_DIR` may name the headers (used only by the ABI test).
//! 2. `QTK_DIR`: an install prefix (`cmake --install build --prefix DIR`): its lib, lib64 or
//!    lib/<multiarch> and its include.
//! 3. The `pkg-config` program, for qtk-ckpt (PKG_CONFIG_PATH is honoured).
//! 4. A CMake build tree of this repository: `QTK_BUILD_DIR`, else `build/` at the repository's
//!    top (two directories above this crate).
//!
//! Static linking is the default: the binary then needs nothing of qtk at run time, only the
//! system's libcbor and jansson. The `shared` feature or `QTK_LINK=shared` links the shared
//! libraries instead, with an rpath to their directory.
use std::env;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

struct Found {
    how: String,
    lib_dirs: Vec<PathBuf>,
    include_dirs: Vec<PathBuf>,
    /// libraries beyond qtk_ckpt and qtk, as the linker names them
    extra: Vec<String>,
    bin_dir: Option<PathBuf>,
}

/// An environment variable naming a path; unset or empty is None.
fn env_path(name: &str) -> Option<PathBuf> {
    env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn has_libs(dir: &Path, shared: bool) -> bool {
    let ext = if shared { "so" } else { "a" };
    dir.join(format!("libqtk_ckpt.{}", ext)).is_file() && dir.join(format!("libqtk.{}", ext)).is_file()
}

fn system_libs() -> Vec<String> {
    ["cbor", "jansson", "m", "pthread"].iter().map(|s| s.to_string()).collect()
}

fn from_lib_dir(shared: bool) -> Option<Found> {
    let dir = env_path("QTK_LIB_DIR")?;
    if !has_libs(&dir, shared) {
        fail(&format!(
            "QTK_LIB_DIR={} holds no libqtk_ckpt.{} and libqtk.{}",
            dir.display(),
            if shared { "so" } else { "a" },
            if shared { "so" } else { "a" }
        ));
    }
    let include_dirs = env_path("QTK_INCLUDE_DIR").map(|d| vec![d]).unwrap_or_default();
    Some(Found { how: format!("QTK_LIB_DIR={}", dir.display()), lib_dirs: vec![dir], include_dirs, extra: system_libs(), bin_dir: None })
}

fn multiarch() -> Option<String> {
    let out = Command::new(env::var("CC").unwrap_or_else(|_| "cc".into())).arg("-print-multiarch").output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if s.is_empty() {
        None
    } else {
        Some(s)
    }
}

fn from_prefix(shared: bool) -> Option<Found> {
    let prefix = env_path("QTK_DIR")?;
    let mut cands = vec![prefix.join("lib"), prefix.join("lib64")];
    if let Some(m) = multiarch() {
        cands.insert(0, prefix.join("lib").join(m));
    }
    for dir in cands {
        if has_libs(&dir, shared) {
            return Some(Found {
                how: format!("QTK_DIR={}", prefix.display()),
                lib_dirs: vec![dir],
                include_dirs: vec![prefix.join("include")],
                extra: system_libs(),
                bin_dir: Some(prefix.join("bin")),
            });
        }
    }
    fail(&format!("QTK_DIR={} has no lib/, lib64/ or lib/<multiarch>/ with libqtk_ckpt and libqtk", prefix.display()));
}

fn from_pkg_config(shared: bool) -> Option<Found> {
    let pc = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let mut cmd = Command::new(&pc);
    cmd.arg("--libs");
    if !shared {
        cmd.arg("--static");
    }
    let out = cmd.arg("qtk-ckpt").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let libs = String::from_utf8(out.stdout).ok()?;
    let cflags = Command::new(&pc).args(["--cflags-only-I", "qtk-ckpt"]).output().ok()?;
    let cflags = String::from_utf8(cflags.stdout).ok()?;
    let mut f = Found { how: "pkg-config qtk-ckpt".into(), lib_dirs: vec![], include_dirs: vec![], extra: vec![], bin_dir: None };
    for tok in libs.split_whitespace() {
        if let Some(d) = tok.strip_prefix("-L") {
            f.lib_dirs.push(PathBuf::from(d));
        } else if let Some(l) = tok.strip_prefix("-l") {
            if l != "qtk_ckpt" && l != "qtk" && !f.extra.iter().any(|e| e == l) {
                f.extra.push(l.to_string());
            }
        } else if tok == "-pthread" && !f.extra.iter().any(|e| e == "pthread") {
            f.extra.push("pthread".into());
        }
    }
    for tok in cflags.split_whitespace() {
        if let Some(d) = tok.strip_prefix("-I") {
            f.include_dirs.push(PathBuf::from(d));
        }
    }
    if let Ok(p) = Command::new(&pc).args(["--variable=libdir", "qtk-ckpt"]).output() {
        let d = String::from_utf8_lossy(&p.stdout).trim().to_string();
        if !d.is_empty() && !f.lib_dirs.iter().any(|x| x == Path::new(&d)) {
            f.lib_dirs.push(PathBuf::from(d));
        }
    }
    if !f.lib_dirs.iter().any(|d| has_libs(d, shared)) {
        return None;
    }
    Some(f)
}

fn from_build_tree(manifest: &Path, shared: bool) -> Option<Found> {
    let repo = manifest.parent()?.parent()?.to_path_buf();
    let dir = env_path("QTK_BUILD_DIR").unwrap_or_else(|| repo.join("build"));
    println!("cargo:rerun-if-changed={}", dir.join("libqtk.a").display());
    println!("cargo:rerun-if-changed={}", dir.join("libqtk_ckpt.a").display());
    if !has_libs(&dir, shared) {
        return None;
    }
    Some(Found {
        how: format!("the CMake build tree {}", dir.display()),
        include_dirs: vec![repo.join("include"), dir.join("include")],
        lib_dirs: vec![dir.clone()],
        extra: system_libs(),
        bin_dir: Some(dir),
    })
}

fn fail(msg: &str) -> ! {
    eprintln!("error: qtk: {}", msg);
    exit(1);
}

fn main() {
    for v in ["QTK_DIR", "QTK_LIB_DIR", "QTK_INCLUDE_DIR", "QTK_BUILD_DIR", "QTK_LINK", "PKG_CONFIG_PATH", "PKG_CONFIG"] {
        println!("cargo:rerun-if-env-changed={}", v);
    }
    println!("cargo:rerun-if-changed=build.rs");
    let shared = env::var_os("CARGO_FEATURE_SHARED").is_some() || env::var("QTK_LINK").map(|v| v == "shared").unwrap_or(false);
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let found = from_lib_dir(shared)
        .or_else(|| from_prefix(shared))
        .or_else(|| from_pkg_config(shared))
        .or_else(|| from_build_tree(&manifest, shared));
    let f = match found {
        Some(f) => f,
        None => fail(&format!(
            "libqtk_ckpt and libqtk ({}) were not found. Build qtk first (in the repository: \
             `cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build`, which this crate finds \
             at ../../build), or install it (`sudo cmake --install build`) so that `pkg-config qtk-ckpt` finds it, \
             or set QTK_DIR to its install prefix or QTK_LIB_DIR to the directory of its libraries. qtk needs \
             Debian's libcbor-dev and libjansson-dev (apt-get install libcbor-dev libjansson-dev pkg-config).",
            if shared { "shared" } else { "static" }
        )),
    };
    for d in &f.lib_dirs {
        println!("cargo:rustc-link-search=native={}", d.display());
    }
    let kind = if shared { "dylib" } else { "static" };
    println!("cargo:rustc-link-lib={}=qtk_ckpt", kind);
    println!("cargo:rustc-link-lib={}=qtk", kind);
    for l in &f.extra {
        println!("cargo:rustc-link-lib=dylib={}", l);
    }
    if shared {
        for d in &f.lib_dirs {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", d.display());
        }
    }
    // for the ABI test (compiles a C probe against the same headers) and the CLI tests
    let inc: Vec<String> = f.include_dirs.iter().map(|d| d.display().to_string()).collect();
    println!("cargo:rustc-env=QTK_SYS_INCLUDE_DIRS={}", inc.join(":"));
    println!("cargo:rustc-env=QTK_SYS_FOUND_BY={}", f.how);
    if let Some(b) = f.bin_dir {
        println!("cargo:rustc-env=QTK_SYS_BIN_DIR={}", b.display());
    }
    println!("cargo:include={}", inc.join(":"));
}
