#!/bin/sh
# Rebuild the training corpus of models/tiny from Debian's documentation packages.
#   dev/tiny/tiny_data.sh OUTDIR     (OUTDIR outside the repository, or a git-ignored folder)
# Downloads the exact package versions below with `apt-get download` (nothing is installed),
# unpacks each with `dpkg -x`, and writes OUTDIR/corpus.txt and OUTDIR/corpus.txt.gz with
# dev/tiny/tiny_data.py (deterministic: sorted files, first occurrence of each paragraph kept).
# Licences (each package's /usr/share/doc/<pkg>/copyright): see models/tiny/MODEL_CARD.md.
set -eu
out=${1:?usage: dev/tiny/tiny_data.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
PKGS="perl-doc=5.36.0-7+deb12u4
postgresql-doc-15=15.20-0+deb12u1
python-django-doc=3:3.2.25-0+deb12u7
python3.11-doc=3.11.2-6+deb12u9
rust-doc=1.63.0+dfsg1-2
sphinx-doc=5.3.0-4
sqlite3-doc=3.40.1-2+deb12u2
apache2-doc=2.4.71-1~deb12u1
python-sqlalchemy-doc=1.4.46+ds1-1
erlang-doc=1:25.2.3+dfsg-1+deb12u4
python-scipy-doc=1.10.1-2
python-pandas-doc=1.5.3+dfsg-2"
mkdir -p "$out/debs" "$out/x"
# shellcheck disable=SC2086
(cd "$out/debs" && apt-get download $PKGS)
for f in "$out"/debs/*.deb; do
    d="$out/x/$(basename "$f" .deb)"
    [ -d "$d" ] || { mkdir -p "$d.tmp" && dpkg -x "$f" "$d.tmp" && mv "$d.tmp" "$d"; }
done
(cd "$out/debs" && sha256sum -- *.deb) > "$out/debs.sha256"
/usr/bin/python3 "$here/tiny_data.py" "$out/x" "$out/corpus.txt"
gzip -9 -n -c "$out/corpus.txt" > "$out/corpus.txt.gz.tmp" && mv "$out/corpus.txt.gz.tmp" "$out/corpus.txt.gz"
sha256sum "$out/corpus.txt" "$out/corpus.txt.gz"
