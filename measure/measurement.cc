#include "measure/measurement.h"

#include <string>

namespace tessel::measure {

Measurement Measurement::FromStatus(const absl::Status& status) {
  Measurement m;
  m.status = MeasureStatusOf(status);
  m.error = std::string(status.message());
  return m;
}

}  // namespace tessel::measure
