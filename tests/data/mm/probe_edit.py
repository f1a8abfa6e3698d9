# probe_edit.py SRC DST REGEX: a copy of an mmproj with the tensors whose
# names match REGEX zeroed (gguf-py); copy_mmproj is probe_pixels.py's too.
import sys, re, numpy as np, gguf


def copy_mmproj(src, dst, edit):
    """SRC's keys and tensors to DST, each tensor as edit(name, array) gives
    it (None: left out; an array of another dtype is written as F32)."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, 'clip')
    for f in r.fields.values():
        if f.name.startswith('GGUF.') or f.name == 'general.architecture': continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            w.add_array(f.name, [f.parts[i].tolist()[0] for i in f.data])
        elif t == gguf.GGUFValueType.STRING:
            w.add_string(f.name, bytes(f.parts[f.data[0]]).decode())
        else:
            w.add_key_value(f.name, f.parts[f.data[0]].tolist()[0], t)
    for t in r.tensors:
        shape = list(reversed([int(x) for x in t.shape]))
        a = np.array(t.data).reshape(shape)
        b = edit(t.name, a)
        if b is None: continue
        w.add_tensor(t.name, b, raw_dtype=t.tensor_type if b.dtype == a.dtype else gguf.GGMLQuantizationType.F32)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


if __name__ == '__main__':
    src, dst, pat = sys.argv[1], sys.argv[2], sys.argv[3]
    copy_mmproj(src, dst, lambda name, a: np.zeros_like(a) if re.search(pat, name) else a)
