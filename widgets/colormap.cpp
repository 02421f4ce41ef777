// Colour maps: anchor tables for viridis and the blue-white-red diverging map, linear
// interpolation between anchors, and their QCPColorGradient / lookup-table forms.
#include "widgets/colormap.h"

#include "widgets/qcp.h"

#include <algorithm>
#include <cmath>

namespace hh::widgets {
namespace {

// Viridis (van der Walt & Smith, matplotlib 1.5), sampled at evenly spaced positions of the
// published 256-entry map: the 9-, 10-, 11- and 20-colour samplings (positions i/8, i/9, i/10,
// i/19), merged and sorted. Between neighbours the map is close to linear in sRGB.
std::vector<ColorMap::Anchor> viridisAnchors() {
  return {
      {0.0, 0xff440154},        {1.0 / 19, 0xff481568}, {0.1, 0xff482576},      {1.0 / 9, 0xff482878},
      {0.125, 0xff472d7b},      {3.0 / 19, 0xff453781}, {0.2, 0xff414487},      {2.0 / 9, 0xff3e4a89},
      {0.25, 0xff3b528b},       {0.3, 0xff35608d},      {1.0 / 3, 0xff31688e},  {7.0 / 19, 0xff2d718e},
      {0.4, 0xff2a788e},        {4.0 / 9, 0xff26828e},  {9.0 / 19, 0xff238a8d}, {0.5, 0xff21918c},
      {5.0 / 9, 0xff1f9e89},    {0.6, 0xff22a884},      {0.625, 0xff27ad81},    {2.0 / 3, 0xff35b779},
      {0.7, 0xff43bf71},        {0.75, 0xff5dc863},     {7.0 / 9, 0xff6dcd59},  {15.0 / 19, 0xff75d054},
      {0.8, 0xff7ad151},        {16.0 / 19, 0xff95d840}, {0.875, 0xffaadc32},   {8.0 / 9, 0xffb4de2c},
      {0.9, 0xffbbdf27},        {18.0 / 19, 0xffdde318}, {1.0, 0xfffde725},
  };
}

// Blue -> white -> red, the 11-class ColorBrewer RdBu scheme reversed (negative = blue).
std::vector<ColorMap::Anchor> divergingAnchors() {
  const QRgb colors[] = {0xff053061, 0xff2166ac, 0xff4393c3, 0xff92c5de, 0xffd1e5f0, 0xfff7f7f7,
                         0xfffddbc7, 0xfff4a582, 0xffd6604d, 0xffb2182b, 0xff67001f};
  std::vector<ColorMap::Anchor> anchors;
  const int n = int(std::size(colors));
  for (int i = 0; i < n; ++i) anchors.push_back({double(i) / (n - 1), colors[i]});
  return anchors;
}

int lerpChannel(int a, int b, double f) { return int(std::lround(a + (b - a) * f)); }

double linearise(int channel) {
  const double c = channel / 255.0;
  return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

}  // namespace

ColorMap::ColorMap(Kind kind, std::vector<Anchor> anchors) : kind_(kind), anchors_(std::move(anchors)) {
  for (int i = 0; i < 256; ++i) lut_[size_t(i)] = rgbAt(i / 255.0);
}

const ColorMap& ColorMap::viridis() {
  static const ColorMap map(Kind::Viridis, viridisAnchors());
  return map;
}

const ColorMap& ColorMap::diverging() {
  static const ColorMap map(Kind::Diverging, divergingAnchors());
  return map;
}

const ColorMap& ColorMap::of(Kind kind) { return kind == Kind::Viridis ? viridis() : diverging(); }

QRgb ColorMap::rgbAt(double t) const {
  if (std::isnan(t)) return nanRgb();
  t = std::clamp(t, 0.0, 1.0);
  // First anchor at or beyond t (anchors are sorted by position).
  auto hi = std::lower_bound(anchors_.begin(), anchors_.end(), t,
                             [](const Anchor& a, double value) { return a.t < value; });
  if (hi == anchors_.begin()) return anchors_.front().rgb;
  if (hi == anchors_.end()) return anchors_.back().rgb;
  auto lo = hi - 1;
  const double f = (t - lo->t) / (hi->t - lo->t);
  return qRgb(lerpChannel(qRed(lo->rgb), qRed(hi->rgb), f), lerpChannel(qGreen(lo->rgb), qGreen(hi->rgb), f),
              lerpChannel(qBlue(lo->rgb), qBlue(hi->rgb), f));
}

QColor ColorMap::colorAt(double t) const { return QColor::fromRgb(rgbAt(t)); }

QRgb ColorMap::rgbFor(double value, double lo, double hi) const {
  if (std::isnan(value)) return nanRgb();
  const double t = hi > lo ? (value - lo) / (hi - lo) : 0.5;
  return lut_[size_t(std::lround(std::clamp(t, 0.0, 1.0) * 255.0))];
}

QCPColorGradient ColorMap::gradient(int stops) const {
  QCPColorGradient g;
  QMap<double, QColor> map;
  stops = std::max(stops, 2);
  for (int i = 0; i < stops; ++i) {
    const double t = double(i) / (stops - 1);
    map.insert(t, colorAt(t));
  }
  for (const Anchor& a : anchors_) map.insert(a.t, QColor::fromRgb(a.rgb));  // exact at anchors
  g.setColorStops(map);
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  g.setLevelCount(350);
  g.setNanHandling(QCPColorGradient::nhNanColor);
  g.setNanColor(QColor::fromRgb(nanRgb()));
  return g;
}

QColor viridisAt(double t) { return ColorMap::viridis().colorAt(t); }
QColor divergingAt(double t) { return ColorMap::diverging().colorAt(t); }

double relativeLuminance(QRgb rgb) {
  return 0.2126 * linearise(qRed(rgb)) + 0.7152 * linearise(qGreen(rgb)) + 0.0722 * linearise(qBlue(rgb));
}

}  // namespace hh::widgets
