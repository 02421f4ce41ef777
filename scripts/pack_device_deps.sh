#!/usr/bin/env bash
# Packs the third-party headers and shared libraries that the engine, the `hedgehog` CLI, the
# engine tests and the benchmarks need (-DHH_BUILD_GUI=OFF) into a relocatable prefix,
# <repo>/.device/deps, for a machine that has LibTorch (the PyTorch wheel), a compiler, CMake and
# Ninja but none of the packages below and no package registry (the GPU machine, Ubuntu 24.04
# x86-64). Run it on the Debian 12 (amd64) development machine; it needs apt-get, dpkg, binutils
# and, for the ICU data below, icu-devtools (icupkg, genccode: libicu-dev depends on it). It
# downloads with `apt-get download` (no root needed, nothing is installed) into a cache outside
# the tree, unpacks with `dpkg -x`, prunes, and makes the prefix relocatable. Idempotent: the
# prefix is rebuilt from the cached .debs on every run. It also writes the same prefix as
# .device/deps.tar.gz (about a third of the size, byte-identical across runs): carry that, and
# unpack it on the target with `tar -xzf .device/deps.tar.gz -C .device`, or carry .device/deps.
# On the target, `. .device/deps/env.sh` sets LD_LIBRARY_PATH, PKG_CONFIG and
# HH_DEPS_CMAKE_ARGS (the -DHDF5_ROOT, -DICU_ROOT, -DPKG_CONFIG_EXECUTABLE hints); pass
# -DCMAKE_PREFIX_PATH="$HH_DEPS/usr;<Torch's prefix>" with them.
#
# What the configure + build need with HH_BUILD_GUI=OFF (CMakeLists.txt, engine/, app/, tests/):
#   find_package(Torch)                    the wheel's LibTorch (also the gloo headers that
#                                          engine/distributed includes): nothing packed
#   find_package(HDF5 COMPONENTS C CXX)    libhdf5-dev          headers, libhdf5/libhdf5_cpp .so links
#                                          libhdf5-103-1        libhdf5_serial.so.103
#                                          libhdf5-cpp-103-1    libhdf5_serial_cpp.so.103 (CXX component)
#                                          libsz2, libaec0      libsz.so.2 -> libaec.so.0 (NEEDED by libhdf5)
#                                          libaec-dev           libsz.so/libaec.so links
#   find_package(nlohmann_json 3)          nlohmann-json3-dev   header-only + CMake config
#   find_package(ICU COMPONENTS uc i18n)   libicu-dev           headers, .so links, .pc
#                                          libicu72             libicuuc/libicui18n/libicudata.so.72
#   find_package(CLI11) (QUIET; no CLI without it)   libcli11-dev   header-only + CMake config
#   pkg_check_modules(sentencepiece)       libsentencepiece-dev .pc, .so links (the hh_spm shim)
#                                          libsentencepiece0    libsentencepiece(_train).so.0
#   find_package(PkgConfig REQUIRED)       pkgconf-bin, libpkgconf3   a pkg-config (wrapped in
#                                          bin/pkg-config: it only sees this prefix's .pc files)
#   find_library(tcmalloc_minimal) (optional)   libtcmalloc-minimal4
#   find_package(OpenMP), Threads          the compiler's libgomp: nothing packed
#   find_package(BLAS) (optional)          not packed: OpenBLAS alone is ~40 MB; without BLAS the
#                                          fused CPU kernels take their LibTorch path
#   Qt6 (QUIET with tests)                 not packed: the engine tests use tests/support/hh_test.h
# libhdf5_serial.so.103 also NEEDs libcurl.so.4 and libcrypto.so.3 (Debian builds HDF5 with the
# read-only S3 driver), and they need more; an Ubuntu 24.04 image may or may not have them. That
# closure goes, libraries only, into fallback/lib, and env.sh (generated below, to be sourced on
# the target) links into fallback/active only the sonames that the target's own loader cannot
# find, so a library the system has is never shadowed:
#   libcurl4 libssl3 libnghttp2-14 libidn2-0 libunistring2 librtmp1 libssh2-1 libpsl5
#   libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
#   libldap-2.5-0 libsasl2-2 libzstd1 libbrotli1 libgnutls30 libnettle8 libhogweed6 libgmp10
#   libp11-kit0 libtasn1-6 libffi8
# Not packed, assumed on any Ubuntu 24.04: libc6 (libc, libm, libdl, libpthread, librt,
# libresolv, ld-linux), libstdc++6, libgcc-s1, zlib1g.
#
# Kept small (HH_DEVDEPS_MAX_MIB, default 48): no docs, man pages, locales, static libraries,
# Fortran or HDF5 high-level libraries, ICU io/tu/test libraries, OpenSSL engines/providers.
# ICU data: libicudata.so.72 is 31 MB of locale data, collation, charset converters and
# dictionaries the engine never loads (engine/tokenizers/unicode_text.cpp uses character
# properties, NFC/NFD/NFKC/NFKD and root-locale lower-casing). With HH_DEVDEPS_ICU_DATA=core (the
# default) it is rebuilt, with the same soname and entry point, from Debian's own data minus
# the per-locale bundles, the subtrees (brkitr, coll, curr, lang, rbnf, region, translit,
# unit, zone) and the .cnv converters: 1.7 MB, keeping normalization (nfkc, nfkc_cf, uts46),
# character names, confusables, StringPrep profiles, the root locale and the supplemental data.
# Break iterators, collators and locale display names then fail with U_MISSING_RESOURCE_ERROR.
# HH_DEVDEPS_ICU_DATA=full keeps Debian's library as is (then raise HH_DEVDEPS_MAX_MIB to ~80).
#
# Relocatable: no absolute symlinks (checked, rewritten if any); .pc files use ${pcfiledir};
# the CMake configs in the prefix (nlohmann_json, CLI11) are relative already (checked).
#   bash scripts/pack_device_deps.sh
#   HH_DEVDEPS_DIR     the prefix           (default: <repo>/.device/deps)
#   HH_DEVDEPS_CACHE   downloaded .debs     (default: ~/.cache/hedgehog/device-debs)
#   HH_DEVDEPS_ICU_DATA core|full            (default: core)
#   HH_DEVDEPS_MAX_MIB size limit            (default: 48)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${HH_DEVDEPS_DIR:-$repo/.device/deps}"
cache="${HH_DEVDEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hedgehog/device-debs}"
icu_data="${HH_DEVDEPS_ICU_DATA:-core}"
max_mib="${HH_DEVDEPS_MAX_MIB:-48}"
arch=x86_64-linux-gnu

log() { printf '\033[1m[pack]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[pack] error:\033[0m %s\n' "$*" >&2; exit 1; }

main_pkgs=(libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libaec-dev libaec0 libsz2
           libicu-dev libicu72 nlohmann-json3-dev libcli11-dev
           libsentencepiece-dev libsentencepiece0 libtcmalloc-minimal4 pkgconf-bin libpkgconf3)
fallback_pkgs=(libcurl4 libssl3 libnghttp2-14 libidn2-0 libunistring2 librtmp1 libssh2-1 libpsl5
               libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
               libldap-2.5-0 libsasl2-2 libzstd1 libbrotli1 libgnutls30 libnettle8 libhogweed6
               libgmp10 libp11-kit0 libtasn1-6 libffi8)
# Sonames every Ubuntu 24.04 has (libc6, libstdc++6, libgcc-s1, zlib1g).
system_sonames=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1 libz.so.1 "

# ---- checks ----------------------------------------------------------------------------------
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "needs an amd64 Debian (dpkg --print-architecture)"
grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null ||
  log "warning: not Debian 12 (bookworm); the packages are whatever this apt offers"
case "$icu_data" in core|full) ;; *) die "HH_DEVDEPS_ICU_DATA must be core or full" ;; esac
need=(apt-get dpkg dpkg-deb readelf objdump)
[ "$icu_data" = core ] && need+=(icupkg genccode gcc)
for t in "${need[@]}"; do
  command -v "$t" >/dev/null 2>&1 || die "$t not found (apt-get install dpkg-dev binutils icu-devtools gcc)"
done

# ---- download (only what the cache lacks) ----------------------------------------------------
mkdir -p "$cache"
deb_of() { # newest cached .deb of a package
  local f
  f=$(ls -1 "$cache/$1"_*_amd64.deb "$cache/$1"_*_all.deb 2>/dev/null | sort -V | tail -n 1 || true)
  printf '%s' "$f"
}
missing=()
for p in "${main_pkgs[@]}" "${fallback_pkgs[@]}"; do
  [ -n "$(deb_of "$p")" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "downloading ${#missing[@]} packages into $cache"
  (cd "$cache" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}") ||
    die "apt-get download failed (run apt-get update?)"
else
  log "all ${#main_pkgs[@]}+${#fallback_pkgs[@]} packages cached in $cache"
fi

# ---- unpack into a staging folder ------------------------------------------------------------
stage="$dest.staging"
rm -rf "$stage" "$stage.fb"
mkdir -p "$stage" "$stage.fb" "$stage/fallback/lib"
for p in "${main_pkgs[@]}"; do dpkg -x "$(deb_of "$p")" "$stage"; done
for p in "${fallback_pkgs[@]}"; do dpkg -x "$(deb_of "$p")" "$stage.fb"; done
lib="$stage/usr/lib/$arch"
# Libraries that Debian 12 still ships under /lib go to /usr/lib (one library folder).
if [ -d "$stage/lib/$arch" ]; then cp -a "$stage/lib/$arch/." "$lib/" && rm -rf "${stage:?}/lib"; fi
# The fallback closure: the shared libraries (files and soname links) and nothing else.
find "$stage.fb/lib/$arch" "$stage.fb/usr/lib/$arch" -maxdepth 1 -name '*.so.*' \
     \( -type f -o -type l \) -exec cp -a {} "$stage/fallback/lib/" \; 2>/dev/null || true
rm -rf "$stage.fb"

# ---- prune -----------------------------------------------------------------------------------
rm -rf "$stage/usr/share/doc" "$stage/usr/share/man" "$stage/usr/share/lintian" \
       "$stage/usr/share/locale" "$stage/usr/share/info" "$stage/usr/share/bug" \
       "$stage/usr/share/icu" "$lib/icu" "${stage:?}/etc" "$stage/usr/lib/pkgconfig"
find "$stage" \( -name '*.a' -o -name '*.la' -o -name '*.mod' \) -delete
# HDF5: C and C++ only (no Fortran, no high-level libraries; they were never downloaded).
find "$lib" -maxdepth 3 \( -name '*fortran*' -o -name '*_hl*' -o -name '*hl_*' \) -delete
# ICU: uc, i18n, data only.
rm -f "$lib"/libicuio.* "$lib"/libicutu.* "$lib"/libicutest.* "$lib/pkgconfig/icu-io.pc"
# tcmalloc: the allocator only, not its debug variant.
rm -f "$lib"/libtcmalloc_minimal_debug.*
# pkgconf: the binary only.
find "$stage/usr/bin" -mindepth 1 ! -name pkgconf -exec rm -rf {} +

# ---- ICU data (core) -------------------------------------------------------------------------
icudata=$(readlink -f "$lib/libicudata.so."[0-9]*[0-9] 2>/dev/null | head -n 1 || true)
[ -f "$icudata" ] || die "libicudata not found in $lib"
icu_major=$(basename "$icudata" | sed -E 's/^libicudata\.so\.([0-9]+).*/\1/')
if [ "$icu_data" = core ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  entry="icudt${icu_major}"
  # The data package is the symbol icudt<N>_dat in .rodata: cut it out of the library.
  sym_addr='' sym_size='' sec_addr='' sec_off=''
  read -r sym_addr sym_size < <(nm -D -S "$icudata" | awk -v s="${entry}_dat" '$4 == s { print $1, $2 }') || true
  [ -n "$sym_addr" ] || die "no ${entry}_dat symbol in $icudata"
  read -r sec_addr sec_off < <(readelf -S -W "$icudata" | sed -E 's/^ *\[ *[0-9]+\] *//' |
                               awk '$1 == ".rodata" { print $3, $4 }') || true
  [ -n "$sec_addr" ] || die "no .rodata section in $icudata"
  off=$(( 0x$sym_addr - 0x$sec_addr + 0x$sec_off ))
  dd if="$icudata" of="$work/${entry}l.dat" bs=1M iflag=skip_bytes,count_bytes \
     skip="$off" count=$((0x$sym_size)) status=none
  icupkg -l "$work/${entry}l.dat" > "$work/all.txt"
  # Remove: every subtree item, the charset converters and the per-locale bundles (2-3 letter
  # language names; root, pool, res_index and the supplemental bundles stay).
  grep -E '/|\.cnv$|^[a-z]{2,3}(_[A-Za-z0-9]+)*\.res$' "$work/all.txt" | grep -vx 'res_index\.res' > "$work/remove.txt"
  # The output keeps the package name icudt<N>l: it is the prefix of every item ICU looks up.
  mkdir "$work/core"
  icupkg -tl -r "$work/remove.txt" "$work/${entry}l.dat" "$work/core/${entry}l.dat" >/dev/null
  (cd "$work/core" && genccode -q -e "$entry" -a gcc -d . "${entry}l.dat")
  gcc -shared -nostdlib -Wl,-soname,"libicudata.so.${icu_major}" -Wl,-z,noexecstack \
      -o "$work/libicudata.so" "$work/core/${entry}l_dat.S"
  nm -D "$work/libicudata.so" | grep " R ${entry}_dat\$" >/dev/null || die "rebuilt libicudata lacks ${entry}_dat"
  install -m 644 "$work/libicudata.so" "$icudata"
  log "ICU data: $(( $(wc -l < "$work/all.txt") - $(wc -l < "$work/remove.txt") )) of $(wc -l < "$work/all.txt") items kept ($(( $(stat -c %s "$icudata") / 1024 )) KiB)"
fi

# ---- relocatable -----------------------------------------------------------------------------
# Absolute symlinks: point them at the same path inside the prefix.
while IFS= read -r -d '' l; do
  t=$(readlink "$l")
  case "$t" in
    /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$stage$t")" "$l"
        log "symlink made relative: ${l#"$stage"/} -> $(readlink "$l")" ;;
  esac
done < <(find "$stage" -type l -print0)
# Links whose target was pruned (Fortran/HL HDF5, ICU io/tu/test) or never packed.
dangling=$(find "$stage" -xtype l -print -delete | sed "s#^$stage/##")
[ -z "$dangling" ] || log "removed $(printf '%s\n' "$dangling" | wc -l) dangling links: $(printf '%s\n' "$dangling" | xargs -n1 basename | tr '\n' ' ')"
# .pc files: prefix from their own location; every other /usr becomes that prefix.
while IFS= read -r -d '' pc; do
  case "$pc" in
    "$stage/usr/lib/$arch/pkgconfig/"*) up='${pcfiledir}/../../..' ;;
    "$stage/usr/share/pkgconfig/"*)     up='${pcfiledir}/../..' ;;
    *) die "unexpected .pc location: $pc" ;;
  esac
  sed -i -E "s#(^|[ =]|-[IL])/usr(/|\$)#\1${up}\2#g" "$pc"
done < <(find "$stage" -name '*.pc' -print0)
if grep -rn --include='*.pc' '/usr' "$stage" | grep -v 'pcfiledir'; then die ".pc files still name /usr"; fi
if grep -rln --include='*.cmake' -E '"/usr|[ ;]/usr/' "$stage"; then die "CMake configs name /usr (not relocatable)"; fi

# pkg-config for CMake: pkgconf, its library, only this prefix's .pc files.
mkdir -p "$stage/bin"
cat > "$stage/bin/pkg-config" <<'EOF'
#!/bin/sh
# pkgconf from the packed prefix, seeing only the prefix's .pc files (scripts/pack_device_deps.sh).
d=$(cd "$(dirname "$0")/.." && pwd)
PKG_CONFIG_LIBDIR="$d/usr/lib/x86_64-linux-gnu/pkgconfig:$d/usr/share/pkgconfig"
LD_LIBRARY_PATH="$d/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_LIBDIR LD_LIBRARY_PATH
unset PKG_CONFIG_PATH
exec "$d/usr/bin/pkgconf" "$@"
EOF
chmod 755 "$stage/bin/pkg-config"

# env.sh, sourced on the target before configuring, building and running.
cat > "$stage/env.sh" <<'EOF'
# Source (bash) before configuring, building or running against this prefix:
#   . .device/deps/env.sh
# Exports HH_DEPS (this folder), LD_LIBRARY_PATH (the prefix's libraries, then fallback/active:
# the packed libraries whose soname the system loader does not know), PKG_CONFIG (the prefix's
# pkg-config wrapper) and HH_DEPS_CMAKE_ARGS (the prefix's hints for cmake, a string).
HH_DEPS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export HH_DEPS
hh_nl='
'
hh_known="$hh_nl$({ /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null || true; } | awk '/x86-64/ { print $1 }')$hh_nl"
rm -rf "$HH_DEPS/fallback/active" && mkdir -p "$HH_DEPS/fallback/active"
while read -r hh_soname; do
  [ -n "$hh_soname" ] || continue
  case "$hh_known" in
    *"$hh_nl$hh_soname$hh_nl"*) ;;
    *) ln -s "../lib/$hh_soname" "$HH_DEPS/fallback/active/$hh_soname" ;;
  esac
done < "$HH_DEPS/fallback/sonames.txt"
export LD_LIBRARY_PATH="$HH_DEPS/usr/lib/x86_64-linux-gnu:$HH_DEPS/fallback/active${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG="$HH_DEPS/bin/pkg-config"
export HH_DEPS_CMAKE_ARGS="-DHDF5_ROOT=$HH_DEPS/usr/lib/x86_64-linux-gnu/hdf5/serial -DICU_ROOT=$HH_DEPS/usr -DPKG_CONFIG_EXECUTABLE=$HH_DEPS/bin/pkg-config"
unset hh_known hh_soname hh_nl
EOF

# ---- closure check: every NEEDED soname is packed or part of the assumed system ---------------
: > "$stage/fallback/sonames.txt"
for f in "$stage/fallback/lib"/*; do
  if [ ! -f "$f" ] || [ -L "$f" ]; then continue; fi
  s=$(objdump -p "$f" | awk '/SONAME/ { print $2 }')
  [ -e "$stage/fallback/lib/$s" ] || die "fallback: no $s link for $f"
  echo "$s" >> "$stage/fallback/sonames.txt"
done
sort -o "$stage/fallback/sonames.txt" "$stage/fallback/sonames.txt"
bad=0
while IFS= read -r -d '' f; do
  readelf -h "$f" >/dev/null 2>&1 || continue  # ELF files only
  for n in $(objdump -p "$f" | awk '/NEEDED/ { print $2 }'); do
    if [ -e "$lib/$n" ] || [ -e "$stage/fallback/lib/$n" ] || [[ "$system_sonames" == *" $n "* ]]; then continue; fi
    echo "  ${f#"$stage"/} needs $n: not packed" >&2; bad=1
  done
done < <(find "$stage" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0)
[ $bad -eq 0 ] || die "unresolved NEEDED sonames (add their packages)"

# ---- manifest, swap in, size -----------------------------------------------------------------
{
  echo "# package version deb_bytes kept_bytes  (scripts/pack_device_deps.sh, ICU data: $icu_data)"
  for p in "${main_pkgs[@]}" "${fallback_pkgs[@]}"; do
    d=$(deb_of "$p"); v=$(dpkg-deb -f "$d" Version); kept=0
    while IFS= read -r path; do
      path=${path#./}
      for c in "$stage/$path" "$lib/$(basename "$path")" "$stage/fallback/lib/$(basename "$path")"; do
        if [ -f "$c" ] && [ ! -L "$c" ]; then kept=$((kept + $(stat -c %s "$c"))); break; fi
      done
    done < <(dpkg-deb -c "$d" | awk '$1 !~ /^[dl]/ { print $6 }')
    echo "$p $v $(stat -c %s "$d") $kept"
  done
} > "$stage/MANIFEST"

rm -rf "$dest"
mv "$stage" "$dest"
bytes=$(du -s --apparent-size -B1 "$dest" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
log "prefix $dest: $mib MiB ($bytes bytes, $(find "$dest" -type f | wc -l) files); packages in $dest/MANIFEST"
if [ "$bytes" -gt $((max_mib * 1048576)) ]; then
  die "$dest is $mib MiB, over the $max_mib MiB limit (HH_DEVDEPS_MAX_MIB)"
fi
# The same prefix as one reproducible .tar.gz beside it (gzip is on every Ubuntu): carried
# instead of the folder it costs about a third of the space, and on the target
#   tar -xzf .device/deps.tar.gz -C .device     gives .device/deps again.
tarball="$(dirname "$dest")/$(basename "$dest").tar.gz"
tar -C "$(dirname "$dest")" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cf - "$(basename "$dest")" | gzip -n -9 > "$tarball.tmp"
mv "$tarball.tmp" "$tarball"
log "archive $tarball: $(awk -v b="$(stat -c %s "$tarball")" 'BEGIN { printf "%.1f", b / 1048576 }') MiB"
