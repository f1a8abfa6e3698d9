import sys, re, numpy as np, gguf
src, dst, pat = sys.argv[1], sys.argv[2], sys.argv[3]
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
    a = np.array(t.data)
    if re.search(pat, t.name): a = np.zeros_like(a)
    shape = list(reversed([int(x) for x in t.shape]))
    w.add_tensor(t.name, a.reshape(shape), raw_dtype=t.tensor_type)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
