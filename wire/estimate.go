package wire

import "time"

// DefaultSampleBytes is an estimation's sample size when the request
// gives none (EstimateIn.SampleSize): Stork samples 20 MB by default (Yin,
// Yildirim et al., "A Data Throughput Prediction and Optimization Service
// for Widely Distributed Many-Task Computing").
const DefaultSampleBytes = 20 << 20

// MaxStreams bounds any stream count a request or job asks for.
const MaxStreams = 1024

// EstimateIn is an estimation request.
type EstimateIn struct {
	Source      string `json:"source" minLength:"1" maxLength:"4096" doc:"sluice://ENDPOINT/path of a file to sample from (its first sample_size bytes)."`
	Destination string `json:"destination" minLength:"1" maxLength:"4096" doc:"sluice://ENDPOINT/path; samples are written beside it (in it, if it ends in /) under a hidden temporary name and removed."`
	Size        int64  `json:"size" doc:"Bytes of the transfer to predict (> 0)."`
	SampleSize  int64  `json:"sample_size,omitempty" doc:"Bytes per sample transfer to start with (default 20 MiB, 64 KiB to 1 GiB). A sample shorter than 20 times a request's set-up on the path (measured with a 64 KiB pull: two or three round trips) mostly measures TCP connection set-up and slow start, so it is taken again, larger, up to 1 GiB or the source's size."`
	Buffer      int64  `json:"buffer,omitempty" minimum:"0" doc:"TCP buffer size (accepted for Stork compatibility; agents use the kernel's autotuning)."`
	MaxStreams  int    `json:"max_streams,omitempty" doc:"Largest stream count to consider (default: the endpoints' limits, at most 32). An answer under a lower limit than that is not kept as the pair's history."`
	Growth      int    `json:"growth,omitempty" doc:"Factor from one sampled stream count to the next (default 4: 1, 4, 16, ...; 2 is the paper's doubling; 2 to 16)."`
	UseHistory  bool   `json:"use_history,omitempty" doc:"Answer from the pair's stored optimisation when fresh, without sampling."`
}

// EstimateOut is the answer.
type EstimateOut struct {
	Source      string           `json:"source" doc:"Source endpoint."`
	Destination string           `json:"destination" doc:"Destination endpoint."`
	Streams     int              `json:"streams" doc:"Optimal number of streams (concurrent partial transfers)."`
	Throughput  float64          `json:"throughput" doc:"Predicted bytes per second with that many streams: the fitted curve's value (throughput_fitted), or, when that lies above every sample by more than the fit's uncertainty, the best sample raised by the uncertainty (clamped)."`
	Fitted      float64          `json:"throughput_fitted" doc:"The fitted curve's bytes per second at streams, before clamping (0 in answers stored before it was recorded)."`
	Uncertainty float64          `json:"uncertainty" doc:"Relative half-width of the fit's interval (0.05: ±5%): twice the relative residual standard error of the samples around the curve, at least the assumed sample noise of 5% (three samples fit the model exactly, so their residuals say nothing)."`
	Clamped     bool             `json:"clamped" doc:"The fitted curve's value at streams lay above every sample by more than the uncertainty, so throughput was lowered to what the samples support; note says by how much."`
	Note        string           `json:"note,omitempty" doc:"Why throughput is not simply the fitted curve's value: clamped, or streams outside the sampled stream counts (extrapolated)."`
	Seconds     float64          `json:"seconds" doc:"Predicted transfer time of size bytes."`
	Size        int64            `json:"size"`
	SampleSize  int64            `json:"sample_size" doc:"Bytes per sample transfer."`
	Samples     []EstimateSample `json:"samples" doc:"The sample transfers (streams, bytes moved, bytes/s, seconds)."`
	Model       string           `json:"model" doc:"How streams was chosen: the fitted model, or why it fell back to the best sample."`
	Cost        float64          `json:"cost_seconds" doc:"Wall-clock seconds spent sampling for this answer (0 from history)."`
	CostBytes   int64            `json:"cost_bytes" doc:"Bytes moved by sampling for this answer (0 from history)."`
	FromHistory bool             `json:"from_history"`
	At          time.Time        `json:"measured_at" doc:"When the samples were taken."`
}

// EstimateSample is one sample transfer.
type EstimateSample struct {
	Streams    int     `json:"streams"`
	Bytes      int64   `json:"bytes,omitempty"` // moved by this sample (0 in answers stored before it was recorded)
	Throughput float64 `json:"throughput"`      // bytes/s
	Seconds    float64 `json:"seconds"`
}
