package admin

import (
	"net/http"
	"net/http/pprof"

	"github.com/go-chi/chi/v5"
)

// profileRoutes serves the Go runtime's profiles under
// /admin/debug/pprof/, behind the API's tokens like every other read: a
// CPU profile of a replica under load is how its cost per call is found
// (`go tool pprof http://HOST/admin/debug/pprof/profile?seconds=10`).
func profileRoutes(r chi.Router) {
	r.Get("/admin/debug/pprof/", pprof.Index)
	r.Get("/admin/debug/pprof/profile", pprof.Profile)
	r.Get("/admin/debug/pprof/symbol", pprof.Symbol)
	r.Get("/admin/debug/pprof/trace", pprof.Trace)
	r.Get("/admin/debug/pprof/{profile}", func(w http.ResponseWriter, r *http.Request) {
		pprof.Handler(chi.URLParam(r, "profile")).ServeHTTP(w, r)
	})
}
