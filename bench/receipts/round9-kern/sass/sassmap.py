# sassmap.py: SASS opcode histograms of a cubin without cuobjdump (round 9). The low 12 bits of each
# 16-byte sm_90 instruction name its opcode; the names come from a cuobjdump -sass text dump of any cubin.
# opcode map from a cuobjdump -sass text dump: low 12 bits of the first 64-bit word -> mnemonic
import re,sys,collections,subprocess,struct
def build_map(path):
    m=collections.defaultdict(collections.Counter)
    lines=open(path).read().split('\n')
    for i,l in enumerate(lines):
        g=re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(\S*)\s.*?/\* (0x[0-9a-f]{16}) \*/',l)
        if g:
            lo=int(g.group(5),16); m[lo&0xfff][g.group(3)]+=1
    return {k:v.most_common(1)[0][0] for k,v in m.items()}, m
def sections(cubin):
    out=subprocess.run(['readelf','-S','-W',cubin],capture_output=True,text=True).stdout
    secs=[]
    for l in out.split('\n'):
        g=re.search(r'\]\s+(\.text\.\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)',l)
        if g: secs.append((g.group(1)[6:],int(g.group(2),16),int(g.group(3),16)))
    return secs
def hist(cubin,name_re,mp):
    data=open(cubin,'rb').read(); res={}
    for name,off,size in sections(cubin):
        if not re.search(name_re,name): continue
        c=collections.Counter(); n=0; urc=0
        for k in range(off,off+size,16):
            lo,hi=struct.unpack_from('<QQ',data,k)
            op=mp.get(lo&0xfff,'?%03x'%(lo&0xfff))
            if op=='NOP' : continue
            n+=1; c[op]+=1
            if (lo&0xfff)==0xe24 and ((lo>>24)&0xff)==0xff: urc+=1
        res[name]=(n,c,urc)
    return res
if __name__=='__main__':
    mp,raw=build_map(sys.argv[1])
    amb={k:v for k,v in raw.items() if len(v)>1}
    if amb: print('ambiguous codes:',{('%03x'%k):dict(v) for k,v in list(amb.items())[:8]},file=sys.stderr)
    r=hist(sys.argv[2],sys.argv[3] if len(sys.argv)>3 else 'item',mp)
    for name,(n,c,urc) in sorted(r.items()):
        print(name,n,'instr',urc,'UR->R IMAD copies',' '.join('%s:%d'%kv for kv in c.most_common(12)))

def per_item(cubin, name_re, mp):
    """instructions from the main loop's mbarrier wait (SYNCS.PHASECHK) to the stage barrier (BAR.SYNC),
    NOPs left out: round 8's per-item count (654 for a16_item_kernel<true, 8, 4>)"""
    data=open(cubin,'rb').read(); res={}
    for name,off,size in sections(cubin):
        if not re.search(name_re,name): continue
        ops=[]
        for k in range(off,off+size,16):
            lo,hi=struct.unpack_from('<QQ',data,k); ops.append(lo)
        i=next(j for j,lo in enumerate(ops) if (lo&0xfff)==0x5a7)
        e=next(j for j in range(i,len(ops)) if (ops[j]&0xfff)==0xb1d)
        c=collections.Counter(); urc=0
        for lo in ops[i:e]:
            op=mp.get(lo&0xfff,'?')
            if op=='NOP': continue
            c[op]+=1
            if (lo&0xfff)==0xe24 and ((lo>>24)&0xff)==0xff: urc+=1
        res[name]=(sum(c.values()),c,urc)
    return res
