// Colour maps for attention plots, built here because QCustomPlot 2.1 ships no viridis.
//   viridis   : perceptually uniform sequential map (dark purple -> teal -> yellow) for weights;
//               piecewise-linear through anchors sampled from the published map, so its
//               lightness rises monotonically from t = 0 to t = 1.
//   diverging : blue -> near-white -> red for signed differences; t = 0.5 is the neutral centre,
//               so a data range symmetric around 0 puts 0 on white.
// colorAt(t) clamps t to [0, 1]; NaN gives the map's NaN colour (a neutral grey). The same map
// is offered as a QCPColorGradient (for QCPColorMap / QCPColorScale) and as a 256-entry lookup
// table of QRgb (for QImage thumbnails painted without QCustomPlot).
#pragma once
#include <QColor>
#include <QVector>
#include <QtGui/qrgb.h>

#include <array>
#include <vector>

class QCPColorGradient;

namespace hh::widgets {

// Neutral backgrounds for masked cells (NaN), e.g. the upper triangle of causal attention:
// light grey under viridis (far from its dark end), mid grey under the diverging map (distinct
// from its near-white centre).
inline constexpr QRgb kMaskedColor = 0xffe6e6e6;
inline constexpr QRgb kMaskedColorDiverging = 0xffb4b4b4;

class ColorMap {
 public:
  enum class Kind { Viridis, Diverging };

  // One anchor of the piecewise-linear map: position in [0, 1] and its sRGB colour.
  struct Anchor {
    double t;
    QRgb rgb;
  };

  static const ColorMap& viridis();
  static const ColorMap& diverging();
  static const ColorMap& of(Kind kind);

  Kind kind() const { return kind_; }
  QRgb nanRgb() const { return kind_ == Kind::Viridis ? kMaskedColor : kMaskedColorDiverging; }
  // Colour at t in [0, 1] (clamped); NaN -> nanRgb().
  QColor colorAt(double t) const;
  QRgb rgbAt(double t) const;
  // Colour of value within [lo, hi] (lo == hi maps to the centre).
  QRgb rgbFor(double value, double lo, double hi) const;

  // A QCPColorGradient with `stops` evenly spaced stops (>= number of anchors is exact at the
  // anchors), NaN drawn as nanRgb(), 350 levels.
  QCPColorGradient gradient(int stops = 64) const;
  // 256 colours, index i = colour at i / 255.
  const std::array<QRgb, 256>& lookupTable() const { return lut_; }
  const std::vector<Anchor>& anchors() const { return anchors_; }

 private:
  ColorMap(Kind kind, std::vector<Anchor> anchors);

  Kind kind_;
  std::vector<Anchor> anchors_;
  std::array<QRgb, 256> lut_{};
};

// Shorthands for ColorMap::viridis().colorAt(t) and ColorMap::diverging().colorAt(t).
QColor viridisAt(double t);
QColor divergingAt(double t);

// Relative luminance (Rec. 709 on linearised sRGB), in [0, 1]: used by tests and to pick a
// readable text colour over a cell.
double relativeLuminance(QRgb rgb);

}  // namespace hh::widgets
