import sys; sys.path.insert(0,'/tmp')
from sassmap import *
mp,_=build_map(sys.argv[1])
for name,(n,c,urc) in sorted(per_item(sys.argv[2],sys.argv[3],mp).items()):
    print(name, n, 'per item = %.2f per weight,'%(n/256.0), urc, 'UR copies |', ' '.join('%s %d'%kv for kv in c.most_common(10)))
