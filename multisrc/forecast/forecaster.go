package forecast

// DefaultWindow is the number of recent forecasts over which a Forecaster
// scores its predictors when NewForecaster is given none: long enough that
// one lucky guess does not decide, short enough to follow a network whose
// behaviour changes.
const DefaultWindow = 10

// Forecaster is NWS's dynamic choice: it runs every predictor of NWS() on
// the series and forecasts with the one whose mean squared error over the
// last window forecasts it made is lowest (ties: the earlier in NWS order).
// Before any error is known (one value observed) it forecasts with "last".
//
// Each predictor's error is recorded when the value it predicted arrives,
// so the choice is the one a forecaster running in real time would have
// made. Non-finite values are skipped. The zero value is ready to use, with
// DefaultWindow.
type Forecaster struct {
	window int
	preds  []Predictor
	errs   []ring // errs[i]: recent squared errors of preds[i]
	seen   bool
}

// ring holds the last cap(buf) squared errors of one predictor.
type ring struct {
	buf  []float64
	next int
}

func (r *ring) push(e float64, n int) {
	if len(r.buf) < n {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % n
}

// mse is the mean of the recorded squared errors. They are >= 0 or +Inf,
// so the sum never meets Inf - Inf and the result is never NaN.
func (r *ring) mse() float64 {
	var sum float64
	for _, e := range r.buf {
		sum += e
	}
	return sum / float64(len(r.buf))
}

// NewForecaster returns a Forecaster that scores predictors over their last
// window forecasts; window <= 0 means DefaultWindow.
func NewForecaster(window int) *Forecaster {
	f := &Forecaster{window: window}
	f.init()
	return f
}

func (f *Forecaster) init() {
	if f.preds != nil {
		return
	}
	if f.window <= 0 {
		f.window = DefaultWindow
	}
	f.preds = NWS()
	f.errs = make([]ring, len(f.preds))
}

// Observe feeds the next value of the series to every predictor, first
// scoring the forecast each made of it. NaN and ±Inf are skipped.
func (f *Forecaster) Observe(x float64) {
	if f == nil || !finite(x) {
		return
	}
	f.init()
	for i, p := range f.preds {
		if v, ok := p.Forecast(); ok {
			d := x - v // may overflow to ±Inf on huge values: the error is then +Inf
			f.errs[i].push(d*d, f.window)
		}
		p.Observe(x)
	}
	f.seen = true
}

// Forecast predicts the next value with the predictor of lowest recent MSE
// and names it; ok is false before any value was observed.
func (f *Forecaster) Forecast() (value float64, by string, ok bool) {
	if f == nil || !f.seen {
		return 0, "", false
	}
	best, bestMSE := -1, 0.0
	for i := range f.preds {
		if len(f.errs[i].buf) == 0 {
			continue
		}
		if m := f.errs[i].mse(); best < 0 || m < bestMSE {
			best, bestMSE = i, m
		}
	}
	if best >= 0 {
		if v, ok := f.preds[best].Forecast(); ok {
			return v, f.preds[best].Name(), true
		}
	}
	// No error known yet: the last value, NWS's first predictor.
	v, ok := f.preds[0].Forecast()
	return v, f.preds[0].Name(), ok
}

// MSE returns the recent mean squared error of every predictor that has
// made at least one scored forecast, by name: what Forecast chose from,
// for logs and for judging how predictable a link is. The map is fresh.
func (f *Forecaster) MSE() map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for i, p := range f.preds {
		if len(f.errs[i].buf) > 0 {
			out[p.Name()] = f.errs[i].mse()
		}
	}
	return out
}

// Predict is the one-shot form: a Forecaster with the given window fed the
// whole series, then asked for the next value. ok is false when the series
// holds no finite value.
func Predict(series []float64, window int) (value float64, by string, ok bool) {
	f := NewForecaster(window)
	for _, x := range series {
		f.Observe(x)
	}
	return f.Forecast()
}
