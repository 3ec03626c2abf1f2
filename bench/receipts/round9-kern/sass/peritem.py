# peritem.py DUMP CUBIN REGEX: per-item (per-stage loop) SASS histogram of the stream kernels in CUBIN
# whose mangled name matches REGEX; DUMP: a cuobjdump -sass text dump (names the opcodes). round 9.
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sassmap import build_map, per_item
mp, _ = build_map(sys.argv[1])
for name, (n, c, urc) in sorted(per_item(sys.argv[2], sys.argv[3], mp).items()):
    print(name, n, 'per item = %.2f per weight,' % (n / 256.0), urc, 'UR copies |',
          ' '.join('%s %d' % kv for kv in c.most_common(10)))
