"""Builds the qtk package against an installed qtk (cmake --install), found with pkg-config.

The extension links qtk's static libraries (libqtk_ckpt.a, libqtk.a) when the installation
has them, so the installed module needs nothing of qtk's at run time (only Debian's libcbor
and jansson); QTK_LINK=shared links libqtk_ckpt.so instead, with an rpath to its directory.
"""

import os
import shlex
import subprocess

import numpy
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def pkgconfig(*args):
    try:
        out = subprocess.run(["pkg-config", *args], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise SystemExit("qtk: pkg-config is needed to find the qtk library (apt-get install pkg-config)")
    except subprocess.CalledProcessError as e:
        raise SystemExit(
            "qtk: pkg-config %s failed: %s\n"
            "Install qtk first (cmake -B build && cmake --build build && cmake --install build --prefix PREFIX)\n"
            "and point PKG_CONFIG_PATH at PREFIX/lib/<multiarch>/pkgconfig." % (" ".join(args), e.stderr.strip()))
    return shlex.split(out)


version = pkgconfig("--modversion", "qtk")[0]
cflags = pkgconfig("--cflags", "qtk-ckpt")
libdir = pkgconfig("--variable=libdir", "qtk-ckpt")[0]
static = [os.path.join(libdir, "libqtk_ckpt.a"), os.path.join(libdir, "libqtk.a")]
extra_objects, link_args = [], []
if os.environ.get("QTK_LINK", "static") == "static" and all(os.path.exists(p) for p in static):
    extra_objects = static
    # what the static libraries need beside them: libcbor, jansson, threads, libm
    deps = pkgconfig("--libs", "libcbor", "jansson") + pkgconfig("--static", "--libs-only-l", "--libs-only-other", "qtk")
    link_args = [a for a in deps if a not in ("-lqtk", "-lqtk_ckpt")] + ["-Wl,--exclude-libs,ALL"]
else:
    link_args = pkgconfig("--libs", "qtk-ckpt") + ["-Wl,-rpath," + libdir]

ext = Extension(
    "qtk._qtk",
    sources=[os.path.join("src", f) for f in
             ("module.c", "pool.c", "scheme.c", "tensor.c", "ckpt.c", "save.c", "convert.c", "matmul.c")],
    include_dirs=[numpy.get_include()],
    extra_compile_args=["-std=c11", "-fvisibility=hidden"] + cflags,
    extra_objects=extra_objects,
    extra_link_args=link_args,
)

with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
    long_description = f.read()

setup(
    name="qtk",
    version=version,
    description="The quantized tensor kit: numpy arrays in and out of every low-bit scheme and checkpoint",
    long_description=long_description,
    long_description_content_type="text/markdown",
    packages=["qtk"],
    package_data={"qtk": ["*.pyi", "py.typed"]},
    ext_modules=[ext],
    python_requires=">=3.10",
    install_requires=["numpy"],
    zip_safe=False,
)
