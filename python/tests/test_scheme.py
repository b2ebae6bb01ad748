"""qtk.Scheme: parsing, the canonical form, sizes, comparison."""

import pickle

import pytest

import qtk
from conftest import SCHEMES


def test_version():
    assert qtk.__version__ == qtk._qtk.version()
    assert qtk.__version__.count(".") == 2


@pytest.mark.parametrize("spec", SCHEMES)
def test_canonical_form_parses_back(spec):
    s = qtk.Scheme(spec)
    again = qtk.Scheme(str(s))
    assert again == s and str(again) == str(s) and hash(again) == hash(s)
    assert qtk.Scheme(s) == s
    assert repr(s) == "qtk.Scheme('%s')" % s
    assert pickle.loads(pickle.dumps(s)) == s


def test_presets_and_fields():
    n = qtk.Scheme("NVFP4")
    assert str(n) == "e2m1,block=16:ue4m3,tensor=f32,store=packed:0"
    assert n.preset == "nvfp4" and n == "nvfp4" and n != "mxfp4" and n != "not a spec"
    assert (n.value, n.bits, n.mode, n.store, n.pack_dim) == ("e2m1", 4, "symmetric", "packed", 0)
    assert (n.block, n.block_dtype, n.tensor_dtype, n.two_level, n.table) == ((16,), "ue4m3", "f32", True, None)
    assert qtk.Scheme(str(n)).preset == "nvfp4"
    assert [qtk.Scheme(p).preset for p in qtk.PRESETS] == list(qtk.PRESETS)
    f = qtk.Scheme("nf4")
    assert (f.mode, f.table, f.block, f.block_dtype, f.tensor_dtype) == ("lookup", "nf4", (64,), "f32", None)
    w = qtk.Scheme("q8s,block=*x1:f32")
    assert w.block == (None, 1) and w.preset is None and not w.two_level
    d = qtk.Scheme("q8f")
    assert (d.block, d.block_dtype, d.store, d.tensor_dtype) == (None, None, "u32", "f32")
    assert len({qtk.Scheme("nvfp4"), qtk.Scheme("e2m1,block=16:ue4m3,tensor=f32,store=packed:0")}) == 1


def test_sizes():
    # README: nvfp4 on 64x32 takes 1156 bytes = 4.5156 bits per element
    n = qtk.Scheme("nvfp4")
    assert n.nbytes((64, 32)) == 1156
    assert abs(n.bits_per_element([64, 32]) - 1156 * 8 / 2048) < 1e-12
    # SPEC: q4f,block=32:f16 on 64x70 takes 2688 bytes (values 2304 + scales 384)
    q = qtk.Scheme("q4f,block=32:f16")
    assert q.nbytes((64, 70)) == 2688
    lay = q.layout((64, 70))
    assert (lay["value_bytes"], lay["scale_bytes"], lay["global_bytes"], lay["table_bytes"]) == (2304, 384, 0, 0)
    assert lay["grid"] == (64, 3) and lay["block"] == (1, 32) and lay["scale_dtype"] == "f16"
    assert qtk.Scheme("q8s").nbytes(()) == 8 and qtk.Scheme("q8s").nbytes(5) == 12


def test_parse_errors_carry_qtk_messages():
    with pytest.raises(qtk.Error) as e:
        qtk.Scheme("q4f,block=32:f17")
    assert e.value.status == "QTK_E_PARSE" and "f17" in str(e.value) and e.value.message == str(e.value)
    with pytest.raises(qtk.Error) as e:
        qtk.Scheme(42)
    assert e.value.status == "QTK_E_ARG"
    with pytest.raises(qtk.Error) as e:
        qtk.Scheme("q4f,block=64x64:f16").nbytes((64,))
    assert e.value.status in ("QTK_E_SHAPE", "QTK_E_SCHEME")
    with pytest.raises(qtk.Error) as e:
        qtk.Scheme("q8s").nbytes((2, -1))
    assert e.value.status == "QTK_E_SHAPE"
    with pytest.raises(qtk.Error) as e:
        qtk.Scheme("q8s").nbytes((1,) * 9)
    assert e.value.status == "QTK_E_SHAPE"
    with pytest.raises(qtk.Error):
        qtk.Scheme("q8s").nbytes("64x64")
    assert "QTK_E_PARSE" in qtk.status_names() and qtk.status_names()[0] == "QTK_OK"


def test_isa_and_threads_settings():
    assert qtk.detect_isa() in ("scalar", "portable", "avx2", "avx512", "neon")
    prev = qtk.get_isa()
    try:
        qtk.set_isa("portable")
        assert qtk.get_isa() == "portable"
        qtk.set_isa("auto")
        assert qtk.get_isa() == qtk.detect_isa()
    finally:
        qtk.set_isa("auto" if prev == qtk.detect_isa() else prev)
    with pytest.raises(qtk.Error) as e:
        qtk.set_isa("sse9")
    assert e.value.status == "QTK_E_ARG"
    n = qtk.get_threads()
    qtk.set_threads(1)
    assert qtk.get_threads() == 1
    qtk.set_threads(n)
    with pytest.raises(qtk.Error):
        qtk.set_threads(-1)


def test_extension_fields():
    k = qtk.Scheme("q4_k")
    assert str(k) == "u4,block=32:u6,min=u6,super=256:f16,store=ggml" and k.preset == "q4_k"
    assert (k.value, k.bits, k.mode, k.store) == ("u4", 4, "affine", "ggml")
    assert (k.offset, k.offset_dtype, k.super_block, k.super_dtype) == ("min", "u6", 256, "f16")
    assert k.block == (32,) and k.block_dtype == "u6"
    assert k.nbytes((64, 256)) == 64 * 144 and k.bits_per_element((64, 256)) == 4.5
    lay = k.layout((64, 256))
    assert lay["value_bytes"] == lay["total_bytes"] == 9216 and lay["offset_bytes"] == 0
    assert lay["grid"] == (64, 8) and lay["n_scales"] == 512
    six = qtk.Scheme("q6_k")
    assert (six.value, six.bits, six.mode, six.offset, six.offset_dtype) == ("q6f", 6, "symmetric", None, None)
    z = qtk.Scheme("u4,block=128:f16,zero=u8")
    assert (z.mode, z.offset, z.offset_dtype, z.store, z.super_block, z.super_dtype) == ("affine", "zero", "u8", "u32",
                                                                                            None, None)
    lay = z.layout((64, 256))
    assert (lay["value_bytes"], lay["scale_bytes"], lay["offset_bytes"], lay["offsets_offset"]) == (8192, 256, 128, 8448)
    assert qtk.Scheme("u5,block=32:f16,offset=f16,store=ggml").preset == "q5_1"
    assert qtk.Scheme("nvfp4").offset is None and qtk.Scheme("nvfp4").super_block is None


# BURNPACK.md section 2.6 (a): QuantScheme::default().with_value(Q4F).per_block([32], F16), the scheme alone
BURN_Q4F_B32 = bytes.fromhex(
    "a56576616c7565635134466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f6"
    "65626c6f636ba26473697a65a26773746f7261676585182001010101636c656e0165647479706563463136")


def test_burn_serialized_schemes():
    s = qtk.Scheme("q4f,block=32:f16")
    assert s.to_burn_cbor() == BURN_Q4F_B32
    assert qtk.Scheme.from_burn_cbor(BURN_Q4F_B32) == s
    assert qtk.Scheme.from_burn_cbor(b"\xa1\x66QFloat" + BURN_Q4F_B32) == s  # the whole dtype
    j = s.to_burn_json()
    assert j == ('{"value":"Q4F","store":{"PackedU32":0},"mode":"Symmetric","tensor":null,'
                 '"block":{"size":{"storage":[32,1,1,1,1],"len":1},"dtype":"F16"}}')
    assert qtk.Scheme.from_burn_json(j) == s
    old = s.to_burn_json(legacy=True)
    assert '"param":"F16"' in old and '"level":{"Block":' in old
    assert qtk.Scheme.from_burn_json(old) == s and qtk.Scheme.from_burn_cbor(s.to_burn_cbor(legacy=True)) == s
    for spec in SCHEMES:
        t = qtk.Scheme(spec)
        if "*" in spec or t.mode == "lookup":
            continue
        assert qtk.Scheme.from_burn_cbor(t.to_burn_cbor()) == t, spec
        assert qtk.Scheme.from_burn_json(t.to_burn_json(legacy=True)) == t, spec
    # lookup: Burn names no table
    nf4 = qtk.Scheme("nf4")
    assert qtk.Scheme.from_burn_json(nf4.to_burn_json(), table="nf4") == nf4
    with pytest.raises(qtk.Error, match="names no table") as e:
        qtk.Scheme.from_burn_cbor(nf4.to_burn_cbor())
    assert e.value.status == "QTK_E_SCHEME"
    # '*' needs the shape; qtk's extension is not Burn's
    w = qtk.Scheme("q8s,block=*:f32")
    with pytest.raises(qtk.Error, match="give the tensor's shape"):
        w.to_burn_cbor()
    assert '"storage":[64,1,1,1,1]' in w.to_burn_json(shape=(4, 64))
    with pytest.raises(qtk.Error, match="QtkQuant") as e:
        qtk.Scheme("q4_k").to_burn_json()
    assert e.value.status == "QTK_E_UNSUPPORTED"
    with pytest.raises(qtk.Error, match="JSON") as e:
        qtk.Scheme.from_burn_json("{")
    assert e.value.status == "QTK_E_FORMAT"
    with pytest.raises(qtk.Error, match="1 bytes follow"):
        qtk.Scheme.from_burn_cbor(BURN_Q4F_B32 + b"\x00")
