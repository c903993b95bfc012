"""forecastReport: a progress line per day, then the report (the last line)."""
import json
import sys
import time

request = json.load(sys.stdin)
city = request.get("city", "Berlin")
total = max(1, min(14, int(request.get("days", 7))))
days = []
for day in range(1, total + 1):
    time.sleep(0.2)
    days.append(f"day {day}: 17 °C, light rain")
    print(json.dumps({"progress": day / total, "partial": {"daysDone": day}}), flush=True)
print(json.dumps({"city": city, "days": days}))
