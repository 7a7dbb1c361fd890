# Python 3 + numpy: the same dicts under protocols 2 to 5, and .npy/.npz files.
import pickle, numpy as np, collections, io, zipfile
out = '../'  # run from testdata/gen
data = (np.arange(2 * 3072) * 7 % 256).astype(np.uint8).reshape(2, 3072)
train = {'batch_label': 'training batch 1 of 1', 'data': data, 'fine_labels': [1, 0], 'coarse_labels': [1, 0],
         'filenames': ['bridge_s_000123.png', 'apple_s_000001.png']}
emb = (np.arange(12, dtype=np.float32) * 0.5).reshape(3, 4)
keys = np.array(['0-n01-n01_1', '1-n01-n01_22', '2-n02-n02_3'])  # '<U12'
leo = collections.OrderedDict([('embeddings', emb), ('keys', keys.astype('S')), ('labels', np.array([0, 0, 1]))])
for proto in (2, 3, 4, 5):
    pickle.dump(train, open(out + 'pickle/py3_train_p%d.pkl' % proto, 'wb'), protocol=proto)
    pickle.dump(leo, open(out + 'pickle/py3_leo_p%d.pkl' % proto, 'wb'), protocol=proto)
# object array of str keys (np.array(list, dtype=object)) and unicode keys
pickle.dump({'embeddings': emb.astype(np.float64), 'keys': keys.astype(object)}, open(out + 'pickle/py3_leo_object_p4.pkl', 'wb'), protocol=4)
pickle.dump({'embeddings': np.asfortranarray(emb), 'keys': keys}, open(out + 'pickle/py3_leo_unicode_fortran_p2.pkl', 'wb'), protocol=2)
np.save(out + 'npy/f4.npy', emb)
np.save(out + 'npy/f8_fortran.npy', np.asfortranarray(emb.astype(np.float64)))
np.save(out + 'npy/i8.npy', np.array([3, -1, 7]))
np.save(out + 'npy/u1_2d.npy', data[:, :4])
np.save(out + 'npy/unicode.npy', keys)
np.save(out + 'npy/bytes.npy', keys.astype('S'))
np.save(out + 'npy/scalar.npy', np.float32(2.5))
# version 2.0 and 3.0 headers
from numpy.lib import format as fmt
for ver in ((2, 0), (3, 0)):
    with open(out + 'npy/f4_v%d.npy' % ver[0], 'wb') as f:
        fmt.write_array(f, emb, version=ver)
np.savez(out + 'npy/embeddings.npz', features=emb, labels=np.array([5, 5, 9], dtype=np.int32))
np.savez_compressed(out + 'npy/embeddings_compressed.npz', features=emb, labels=keys)
