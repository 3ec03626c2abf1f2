/* page.c — the chat page served at / : plain HTML and JavaScript, no build step, nothing fetched
 * from elsewhere. It streams answers from /v1/chat/completions (SSE over fetch), has a stop
 * button (aborts the fetch: the server cancels the request), shows the model's id from
 * /v1/models and the tokens per second of each answer. /#ask=TEXT sends TEXT at once (a link
 * to a question; the headless browser test's way in: the fragment never reaches the server);
 * body's data-answers counts the answers ended. */
#include "server/server.h"

const char fp4_server_page[] =
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>fp4lane</title>\n"
    "<meta name=viewport content='width=device-width,initial-scale=1'>\n"
    "<style>body{font:15px system-ui,sans-serif;max-width:46em;margin:1em auto;padding:0 1em}"
    "#log div{white-space:pre-wrap;margin:.4em 0;padding:.4em;border-radius:6px}.user{background:#eef}"
    ".assistant{background:#f4f4f4}#bar{display:flex;gap:.5em}#msg{flex:1}#stat{color:#666;font-size:13px}"
    "</style></head><body><h3>fp4lane <span id=model>…</span></h3><div id=log></div>\n"
    "<form id=bar><input id=msg autocomplete=off placeholder='Message'><button id=send>Send</button>"
    "<button id=stop type=button disabled>Stop</button></form><div id=stat></div>\n"
    "<script>\n"
    "const $=id=>document.getElementById(id);let msgs=[],ctl=null,answers=0,"
    "key=localStorage.getItem('fp4key')||'';\n"
    "function hdr(){const h={'Content-Type':'application/json'};if(key)h.Authorization='Bearer "
    "'+key;return h}\n"
    "fetch('/v1/models',{headers:hdr()}).then(r=>r.json()).then(j=>{$('model').textContent=j.data[0].id})"
    ".catch(()=>{});\n"
    "function add(role,text){const d=document.createElement('div');d.className=role;d.textContent=text;"
    "$('log').appendChild(d);return d}\n"
    "$('stop').onclick=()=>{if(ctl)ctl.abort()};\n"
    "$('bar').onsubmit=async e=>{e.preventDefault();const t=$('msg').value;if(!t||ctl)return;$("
    "'msg').value='';"
    "msgs.push({role:'user',content:t});add('user',t);const out=add('assistant','');ctl=new Abo"
    "rtController();"
    "$('stop').disabled=false;$('send').disabled=true;let n=0,t0=performance.now(),t1=0,text='';\n"
    "try{const r=await fetch('/v1/chat/completions',{method:'POST',headers:hdr(),signal:ctl.signal,"
    "body:JSON.stringify({messages:msgs,stream:true,stream_options:{include_usage:true}})});\n"
    "if(!r.ok){out.textContent='error: '+(await r.json()).error.message;msgs.pop()}else{"
    "const rd=r.body.getReader(),dec=new TextDecoder();let buf='';\n"
    "for(;;){const {value,done}=await rd.read();if(done)break;buf+=dec.decode(value,{stream:true});let i;\n"
    "while((i=buf.indexOf('\\n\\n'))>=0){const ev=buf.slice(0,i);buf=buf.slice(i+2);"
    "if(!ev.startsWith('data: ')||ev==='data: [DONE]')continue;const j=JSON.parse(ev.slice(6));"
    "if(j.usage)n=j.usage.completion_tokens;const c=j.choices&&j.choices[0];"
    "if(c&&c.delta&&c.delta.content){if(!t1)t1=performance.now();text+=c.delta.content;out.text"
    "Content=text}}}\n"
    "msgs.push({role:'assistant',content:text});const s=(performance.now()-(t1||t0))/1000;"
    "$('stat').textContent=n+' tokens, '+(s>0?(n/s).toFixed(1):'-')+' tok/s'}}\n"
    "catch(err){out.textContent=text+' [stopped]';msgs.push({role:'assistant',content:text})}\n"
    "ctl=null;$('stop').disabled=true;$('send').disabled=false;document.body.dataset.answers=++answers};\n"
    "if(location.hash.startsWith('#ask=')){$('msg').value=decodeURIComponent(location.hash.slice(5));"
    "$('bar').requestSubmit()}\n"
    "</script></body></html>\n";
