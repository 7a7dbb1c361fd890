# Python 2: pickles shaped exactly like numpy's, via stand-in classes whose
# __reduce__ returns what numpy's does (numpy is not installed here).
import sys, types, cPickle
np = types.ModuleType('numpy'); core = types.ModuleType('numpy.core'); ma = types.ModuleType('numpy.core.multiarray')
sys.modules['numpy'] = np; sys.modules['numpy.core'] = core; sys.modules['numpy.core.multiarray'] = ma
def _reconstruct(*a): pass
_reconstruct.__module__ = 'numpy.core.multiarray'
ma._reconstruct = _reconstruct
class dtype(object):
    def __init__(self, s, order, elsize=-1): self.s, self.order, self.elsize = s, order, elsize
    def __reduce__(self): return (dtype, (self.s, 0, 1), (3, self.order, None, None, None, self.elsize, -1 if self.elsize == -1 else 1, 0))
dtype.__module__ = 'numpy'
class ndarray(object):
    def __init__(self, shape, dt, data): self.shape, self.dt, self.data = shape, dt, data
    def __reduce__(self): return (_reconstruct, (ndarray, (0,), 'b'), (1, self.shape, self.dt, False, self.data))
ndarray.__module__ = 'numpy'
np.dtype = dtype; np.ndarray = ndarray
n = 2
data = ''.join(chr((i * 7 + j) % 256) for i in range(n) for j in range(3072))
train = {'data': ndarray((n, 3072), dtype('u1', '|'), data), 'fine_labels': [1, 0], 'coarse_labels': [1, 0],
         'filenames': ['bridge_s_000123.png', 'apple_s_000001.png'], 'batch_label': 'training batch 1 of 1'}
cPickle.dump(train, open('../pickle/py2_train.pkl', 'wb'), 2)
meta = {'fine_label_names': ['apple', 'bridge'], 'coarse_label_names': ['fruit_and_vegetables', 'large_man-made_outdoor_things']}
cPickle.dump(meta, open('../pickle/py2_meta.pkl', 'wb'), 2)
# LEO-style embeddings: float32 (N, 4) features, '|S' keys padded with NULs.
import struct
emb = ''.join(struct.pack('<f', 0.5 * i) for i in range(12))
keys = ['0-n01-n01_1', '1-n01-n01_22', '2-n02-n02_3']
w = max(len(k) for k in keys)
kdata = ''.join(k + '\0' * (w - len(k)) for k in keys)
leo = {'embeddings': ndarray((3, 4), dtype('f4', '<'), emb), 'keys': ndarray((3,), dtype('S%d' % w, '|', w), kdata),
       'labels': ndarray((3,), dtype('i8', '<'), struct.pack('<3q', 0, 0, 1))}
cPickle.dump(leo, open('../pickle/py2_leo.pkl', 'wb'), 2)
