package main

import "net/http"

// debugRoutes serves /debug/corral (filled in with the debug page).
func (d *daemon) debugRoutes(mux *http.ServeMux) {}
