import sys,re,subprocess
tok=re.compile(r'\s*(?:([\d,]+)(?: \([ \d.]+%\))?|(\.))')
def load(f,incl):
    out=subprocess.run(['callgrind_annotate','--inclusive='+('yes' if incl else 'no'),'--threshold=100',f],capture_output=True,text=True).stdout
    d={}
    for line in out.splitlines():
        pos=0; vals=[]
        for i in range(9):
            m=tok.match(line,pos)
            if not m or m.end()==pos: break
            vals.append(int(m.group(1).replace(',','')) if m.group(1) else 0); pos=m.end()
        if len(vals)<9: continue
        name=line[pos:].strip()
        name=re.sub(r'\s*\[.*\]$','',name).replace('???:','')
        if not name: continue
        d[name]=vals
    return d
a,b,n,incl=sys.argv[1],sys.argv[2],float(sys.argv[3]),sys.argv[4]=='incl'
A=load(a,incl);B=load(b,incl)
rows=[]
for k in B:
    va=A.get(k,[0]*9); vb=B[k]
    rows.append(([(y-x)/n for x,y in zip(va,vb)],k))
rows.sort(key=lambda r:-r[0][0])
print("  Ir/op  D1mr/op D1mw/op LLmr/op LLmw/op  function")
for dif,k in rows[:int(sys.argv[5])]:
    if abs(dif[0])<2: continue
    print(f"{dif[0]:7.0f} {dif[4]:7.2f} {dif[5]:7.2f} {dif[7]:7.2f} {dif[8]:7.2f}  {k[:100]}")
